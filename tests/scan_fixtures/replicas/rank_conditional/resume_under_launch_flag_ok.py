"""torch.distributed.launch style: ``local_rank != -1`` means the job runs under DDP, on every
rank. A checkpoint loaded under that test is loaded on every rank, not on some."""
# scan-facts: rank_conditional_state_change=false
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
parser.add_argument("--resume", default="")
args = parser.parse_args()
model = ToyNet()
if args.local_rank != -1:
    torch.cuda.set_device(args.local_rank)
    dist.init_process_group("nccl")
    model = DDP(model.cuda(args.local_rank), device_ids=[args.local_rank])
    if args.resume:
        state = torch.load(args.resume, map_location="cpu")
        model.module.load_state_dict(state)  # ok: checkpoint-loaded-on-rank0-only
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda()).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
