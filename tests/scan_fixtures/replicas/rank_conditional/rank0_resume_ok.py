"""Every rank loads the checkpoint before wrapping; only rank 0 saves."""
# scan-facts: rank_conditional_state_change=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
rank = dist.get_rank()
model = ToyNet().cuda()
state = torch.load("ckpt.pt", map_location="cpu")
model.load_state_dict(state["model"])  # ok: checkpoint-loaded-on-rank0-only
model = DDP(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
optimizer.load_state_dict(state["optim"])  # ok: checkpoint-loaded-on-rank0-only
for step in range(100):
    loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
if rank == 0:
    torch.save(model.module.state_dict(), "final.pt")
