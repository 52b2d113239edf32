"""The loss is a per-rank mean and is multiplied by the data-parallel size from a parallel-state
helper the scan cannot read (its name says what it returns): W times the averaged gradient."""
# scan-facts: loss_multiplied_by_world_size=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from mylib.parallel_state import get_data_parallel_world_size

dist.init_process_group("nccl")
model = DDP(torch.nn.Linear(16, 4).cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    x = torch.randn(8, 16, device="cuda")
    y = torch.randint(0, 4, (8,), device="cuda")
    loss = F.cross_entropy(model(x), y)
    (loss * get_data_parallel_world_size()).backward()  # expect: loss-scaled-by-world-size
    opt.step()
    opt.zero_grad()
