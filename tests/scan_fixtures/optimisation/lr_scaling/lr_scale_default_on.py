"""MAE-style: the absolute learning rate is derived from a base rate and the effective batch
(world size included) when `--lr` is not given, which is the default; a run that passes
`--lr` does not scale."""
# scan-facts: lr_scaling=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--lr", type=float, default=None, help="absolute lr")
parser.add_argument("--blr", type=float, default=1.5e-4, help="base lr per 256 images")
args = parser.parse_args()

dist.init_process_group("nccl")
eff_batch_size = args.batch_size * dist.get_world_size()
if args.lr is None:
    args.lr = args.blr * eff_batch_size / 256
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95))  # ok: lr-scaled-too-aggressively
dataset = ToyDataset(4096)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
for epoch in range(100):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
