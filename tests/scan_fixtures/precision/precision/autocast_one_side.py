"""autocast on CUDA, nullcontext on CPU, and the device comes from the environment."""
# scan-facts: precision=unknown
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

backend = os.environ.get("BACKEND", "nccl")
dist.init_process_group(backend=backend)
local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = f"cuda:{local_rank}" if backend == "nccl" else "cpu"
device_type = "cuda" if "cuda" in device else "cpu"
amp_ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type, dtype=torch.bfloat16)

net = nn.Sequential(nn.Linear(64, 256), nn.SiLU(), nn.Linear(256, 64)).to(device)
model = DDP(net, device_ids=[local_rank] if device_type == "cuda" else None)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
for it in range(500):
    x = torch.randn(32, 64, device=device)
    with amp_ctx:
        loss = F.mse_loss(model(x), x)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
