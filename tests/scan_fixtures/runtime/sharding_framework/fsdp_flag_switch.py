"""A task object picks FSDP or DDP by an opt-in `--fsdp` flag the run may not pass: the sharded
wrap is one side of a switch, so "uses FSDP" is not decided (its default says plain DDP)."""

# scan-facts: uses_fsdp_or_zero=unknown hand_written_loop=true
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


class Task:
    def __init__(self, net):
        self.net = net
        self.wrapped = net

    def shard(self):
        for block in self.net.children():
            fully_shard(block)
        fully_shard(self.net)

    def replicate(self, device):
        self.wrapped = DDP(self.net, device_ids=[device])


parser = argparse.ArgumentParser()
parser.add_argument("--fsdp", action="store_true")
args = parser.parse_args()

dist.init_process_group("nccl")
device = dist.get_rank() % torch.cuda.device_count()
task = Task(ToyNet().cuda())
if args.fsdp:
    task.shard()
else:
    task.replicate(device)
model = task.wrapped
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
