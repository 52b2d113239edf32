"""The world size read from the environment inside a try, with a single-process fallback in
the handler: the body is the reading for a job launched by torchrun, so the DDP set-up below
is live and the unsharded DataLoader is a finding."""
# scan-facts: uses_distributed_sampler=false
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

try:
    world_size = int(os.environ["WORLD_SIZE"])
except KeyError:
    world_size = 1

model = nn.Linear(8, 1)
if world_size > 1:
    dist.init_process_group("nccl")
    model = DDP(model.cuda())
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(data, batch_size=32, shuffle=True)  # expect: no-distributed-sampler
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
