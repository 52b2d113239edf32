"""ZeRO-1 (ZeroRedundancyOptimizer) on top of DDP only when `--zero_stage 1` is passed: its
default (0) keeps a plain AdamW, so whether optimizer state is sharded is the run's choice."""
# scan-facts: uses_fsdp_or_zero=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--zero_stage", type=int, default=0)
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
if args.zero_stage == 1:
    optimizer = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4
    )
else:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
