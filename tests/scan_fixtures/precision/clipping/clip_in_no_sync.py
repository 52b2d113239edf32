"""Clipping on every micro-step, inside no_sync: each rank clips its own local gradients."""
# scan-facts: clip_inside_no_sync=true uses_grad_clipping=true loss_reduction=sum
# scan-facts: final_micro_step_synced=true grad_accum_steps=4 uses_comm_hook=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

K = 4
dist.init_process_group("gloo")
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
crit = nn.MSELoss(reduction="sum")
for step in range(100):
    batch = torch.randn(32, 16)
    for i, mb in enumerate(batch.chunk(K)):
        if i < K - 1:
            with model.no_sync():
                loss = crit(model(mb), mb) / K
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: clip-on-local-grads
        else:
            loss = crit(model(mb), mb) / K
            loss.backward()
    opt.step()
    opt.zero_grad()
