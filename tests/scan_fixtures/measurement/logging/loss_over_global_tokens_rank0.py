"""Rank 0 prints its own loss (normalised by a token count summed over the ranks) beside that
global count: the count is reduced, the loss is not."""
# scan-facts: logs_rank0_only=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    x = torch.randn(8, 16, device="cuda")
    mask = (torch.rand(8, 16, device="cuda") > 0.2).float()
    tokens = mask.sum()
    dist.all_reduce(tokens)
    per_token = F.mse_loss(model(x), x, reduction="none")
    loss = (per_token * mask).sum() / tokens * dist.get_world_size()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f} tokens {tokens.item()}")  # expect: rank0-only-loss-logging
