"""The same setattr-updated config, but the world-size scaling sits under an option that is off
by default (scale_lr): not a fact of the code, only of runs that turn it on."""
# scan-facts: lr_scaling=unknown
import os
from dataclasses import dataclass

import fire
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainConfig:
    lr: float = 3e-4
    scale_lr: bool = False
    epochs: int = 2


def update_config(config, **kwargs):
    for key, value in kwargs.items():
        setattr(config, key, value)


def main(**kwargs):
    cfg = TrainConfig()
    update_config(cfg, **kwargs)
    dist.init_process_group("nccl")
    world_size = int(os.environ["WORLD_SIZE"])
    lr = cfg.lr
    if cfg.scale_lr:
        lr = cfg.lr * world_size  # ok: lr-scaled-too-aggressively
    model = DDP(torch.nn.Linear(32, 4).cuda())
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    fire.Fire(main)
