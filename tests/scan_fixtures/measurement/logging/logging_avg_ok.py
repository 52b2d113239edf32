"""Logged loss summed across ranks and divided by the world size: correct."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
world_size = dist.get_world_size()
model = DDP(ToyNet())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
running = torch.zeros(())
for step in range(100):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    running += loss.detach()
    if step % 10 == 9:
        dist.all_reduce(running)
        running /= world_size
        if dist.get_rank() == 0:
            print(f"step {step} loss {running.item() / 10:.4f}")  # ok: metric-reduction-wrong, rank0-only-loss-logging
        running.zero_()
