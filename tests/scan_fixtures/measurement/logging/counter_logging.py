"""A hand-kept step counter gates logging and stepping (counters are not constants)."""
# scan-facts: logs_rank0_only=true grad_accum_steps=2 zero_grad_every_micro_step=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while step < 1000:
    loss = model(torch.randn(4, 16)).pow(2).mean() / 2
    loss.backward()
    step += 1
    if step % 2 == 0:
        opt.step()
        opt.zero_grad()
    if step % 50 == 0 and rank == 0:
        print(f"step {step} loss {loss.item() * 2:.3f}")  # expect: rank0-only-loss-logging
