"""FSDP or DDP chosen by an environment variable the scan cannot read: either may run."""

# scan-facts: uses_fsdp_or_zero=unknown
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
net = ToyNet().cuda()
if os.environ.get("SHARD") == "1":
    model = FSDP(net)
else:
    model = DDP(net, device_ids=[int(os.environ["LOCAL_RANK"])])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
