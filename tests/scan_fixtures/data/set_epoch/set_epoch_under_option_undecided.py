"""The only set_epoch call sits under ``if epoch > 0 and cfg["reload"]:`` (the loader rebuilt
each epoch when a config key asks for it). The epoch part holds from the second pass on, but
the config part is the run's choice: whether the sampler's epoch is ever set is not decided."""
# scan-facts: calls_set_epoch=unknown uses_distributed_sampler=true
import sys

import torch
import torch.distributed as dist
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def make_loader(cfg):
    data = ToyDataset(4096)
    return DataLoader(data, batch_size=cfg["batch"], sampler=DistributedSampler(data))


with open(sys.argv[1]) as f:
    cfg = yaml.safe_load(f)
dist.init_process_group("nccl")
loader = make_loader(cfg)
model = DDP(ToyNet().cuda())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(cfg["epochs"]):  # ok: sampler-set-epoch-missing
    if epoch > 0 and cfg["reload"]:
        loader = make_loader(cfg)
        loader.sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda()).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
