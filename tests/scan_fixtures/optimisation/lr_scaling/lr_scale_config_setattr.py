"""A dataclass config the command line updates through setattr (a fire entry point's keyword
arguments); the learning rate is multiplied by the world size on every path. The config's
enable_fsdp default (False) does not make the distributed set-up dead code."""
# scan-facts: lr_scaling=linear
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
    batch_size: int = 16
    enable_fsdp: bool = False
    epochs: int = 2


def update_config(config, **kwargs):
    for key, value in kwargs.items():
        if hasattr(config, key):
            setattr(config, key, value)


def main(**kwargs):
    cfg = TrainConfig()
    update_config(cfg, **kwargs)
    if cfg.enable_fsdp:
        dist.init_process_group("nccl")
        world_size = int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
    model = DDP(torch.nn.Linear(32, 4).cuda(), device_ids=[local_rank])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr * world_size)  # expect: lr-scaled-too-aggressively
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=cfg.batch_size, sampler=sampler)
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    fire.Fire(main)
