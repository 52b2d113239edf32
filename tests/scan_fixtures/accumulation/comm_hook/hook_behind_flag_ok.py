"""A compression hook registered only when a flag asks for it (off by default): whether the
run's gradients go through the hook is the run's choice, so neither fact is decided."""
# scan-facts: uses_comm_hook=unknown comm_hook_averages=unknown
import argparse

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--compress_grads", action="store_true")
args = parser.parse_args()

dist.init_process_group("gloo")
model = DDP(ToyNet())
if args.compress_grads:
    model.register_comm_hook(None, default_hooks.fp16_compress_hook)  # ok: custom-comm-hook-scaling
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(100):
    loss = model(torch.randn(4, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
