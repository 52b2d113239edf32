"""Clipping through a library helper, switched by `--clip-grad` (off by default): whether the
run clips is the run's flag, not the code's."""
# scan-facts: uses_grad_clipping=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from timm import utils
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--clip-grad", type=float, default=None)
parser.add_argument("--clip-mode", default="norm")
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        if args.clip_grad is not None:
            utils.dispatch_clip_grad(model.parameters(), value=args.clip_grad, mode=args.clip_mode)
        optimizer.step()  # ok: grad-clip-missing
