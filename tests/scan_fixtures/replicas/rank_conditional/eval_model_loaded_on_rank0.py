"""A reference model loaded on rank 0 only, run by rank 0's evaluation alone: no training
forward uses it, so no replica differs, and the scan does not say the ranks' state does."""
# scan-facts: rank_conditional_state_change=unknown
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
rank = dist.get_rank()
reference = ToyNet().cuda()
if rank == 0:
    reference.load_state_dict(torch.load("reference.pt", map_location="cpu"))
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    x = torch.randn(8, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if rank == 0 and step % 10 == 0:
        with torch.no_grad():
            gap = F.mse_loss(model.module(x), reference(x))
        print(f"step {step} gap to reference {gap.item():.4f}")
