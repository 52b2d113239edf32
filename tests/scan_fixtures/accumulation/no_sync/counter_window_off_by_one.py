"""A step counter incremented at the top of the loop, an accumulation count the code derives
from the command line and the world size, and a no_sync test that looks one micro-batch ahead:
the micro-batch before optimizer.step() runs under no_sync, so the step uses local gradients."""
# scan-facts: final_micro_step_synced=false
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--total_batch_size", type=int, default=512)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--accum", type=int, default=None)
args = parser.parse_args()
dist.init_process_group("nccl")
world_size = dist.get_world_size()
if args.accum is None:
    args.accum = args.total_batch_size // (args.batch_size * world_size)
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = ToyDataset(4096)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
global_step = 0
for batch in loader:
    global_step += 1
    if (global_step + 1) % args.accum != 0:
        with model.no_sync():  # expect: no-sync-misaligned
            loss = model(batch["x"].cuda()).pow(2).mean() / args.accum
            loss.backward()
    else:
        loss = model(batch["x"].cuda()).pow(2).mean() / args.accum
        loss.backward()
    if global_step % args.accum != 0:
        continue
    optimizer.step()
    optimizer.zero_grad()
