"""Accumulation whose sync and zeroing depend on helpers from another package."""
# scan-facts: grad_accum_steps=4 uses_no_sync=true final_micro_step_synced=unknown
# scan-facts: zero_grad_every_micro_step=unknown loss_divided_by_accum=unknown hand_written_loop=true
# scan-facts: uses_comm_hook=false logs_rank0_only=unknown rank_seeds_identical=unknown
import contextlib

import torch
import torch.distributed as dist
from schedules import is_update_step, should_zero
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

ACCUM = 4
scale_factor = 0.5

dist.init_process_group("gloo")
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1000):
    if should_zero(step):
        opt.zero_grad()
    ctx = model.no_sync() if not is_update_step(step) else contextlib.nullcontext()
    with ctx:
        loss = model(torch.randn(8, 16)).pow(2).mean() * scale_factor
        loss = loss / scale_factor
        loss.backward()
    if (step + 1) % ACCUM == 0:
        opt.step()
