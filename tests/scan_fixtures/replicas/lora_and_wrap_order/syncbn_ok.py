"""BatchNorm converted to SyncBatchNorm before wrapping."""
# scan-facts: has_batchnorm=true uses_syncbn=true broadcast_buffers_disabled=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyBNNet

dist.init_process_group("nccl")
model = ToyBNNet()
model = nn.SyncBatchNorm.convert_sync_batchnorm(model)  # ok: params-added-after-ddp-wrap
model = DDP(model.cuda(), broadcast_buffers=True)  # ok: broadcast-buffers-disabled, batchnorm-without-syncbn
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(100):
    x = torch.randn(8, 3, 16, 16, device="cuda")
    loss = model(x).logsumexp(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
