"""Swin-style: warmup epochs come from a config object merged from a YAML file named on the
command line; the timm scheduler's warmup_t is computed from it, so it is not known."""
# scan-facts: warmup_steps=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
import yaml
from timm.scheduler.cosine_lr import CosineLRScheduler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--cfg", required=True)
args = parser.parse_args()
with open(args.cfg) as f:
    config = yaml.safe_load(f)


def build_scheduler(config, optimizer, n_iter_per_epoch):
    num_steps = int(config["TRAIN"]["EPOCHS"] * n_iter_per_epoch)
    warmup_steps = int(config["TRAIN"]["WARMUP_EPOCHS"] * n_iter_per_epoch)
    return CosineLRScheduler(  # ok: warmup-too-short
        optimizer,
        t_initial=num_steps - warmup_steps,
        lr_min=1e-6,
        warmup_lr_init=1e-7,
        warmup_t=warmup_steps,
        t_in_epochs=False,
    )


dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
scheduler = build_scheduler(config, optimizer, len(loader))
for epoch in range(config["TRAIN"]["EPOCHS"]):
    sampler.set_epoch(epoch)
    for idx, batch in enumerate(loader):
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step_update(epoch * len(loader) + idx)
