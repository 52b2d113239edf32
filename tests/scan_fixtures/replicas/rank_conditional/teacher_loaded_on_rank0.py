"""Distillation: the teacher's weights are loaded on rank 0 only; the student is wrapped. The
teacher's forward feeds the loss every rank backpropagates, and no wrapper ever broadcasts
it: the other ranks distil from a random teacher."""
# scan-facts: rank_conditional_state_change=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
rank = dist.get_rank()
teacher = ToyNet().cuda()
if rank == 0:
    teacher.load_state_dict(torch.load("teacher.pt", map_location="cpu"))
teacher.eval()
student = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
for step in range(100):
    x = torch.randn(8, 16, device="cuda")
    with torch.no_grad():
        target = teacher(x)
    loss = F.mse_loss(student(x), target)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
