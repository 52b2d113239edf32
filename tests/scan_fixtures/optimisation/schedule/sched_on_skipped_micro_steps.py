"""A step counter modulo an accumulation count the code derives; the scheduler is stepped on
the micro-batches that skip the optimizer as well as after optimizer.step(), which an option
guards together with it: the schedule advances once per micro-batch, the count (unknown
here) times per optimizer step."""
# scan-facts: scheduler_steps_per_optimizer_step=unknown
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
parser.add_argument("--fused_step", action="store_true")
args = parser.parse_args()
dist.init_process_group("nccl")
if args.accum is None:
    args.accum = args.total_batch_size // (args.batch_size * dist.get_world_size())
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 1000))
data = ToyDataset(4096)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
global_step = 0
for batch in loader:
    global_step += 1
    loss = model(batch["x"].cuda()).pow(2).mean() / args.accum
    loss.backward()
    if global_step % args.accum != 0:
        scheduler.step()
        continue
    if not args.fused_step:
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
