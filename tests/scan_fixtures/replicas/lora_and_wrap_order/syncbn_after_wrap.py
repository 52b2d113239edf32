"""SyncBatchNorm conversion after the wrap swaps modules DDP already registered."""
# scan-facts: module_created_after_wrap=true uses_syncbn=true
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyBNNet

dist.init_process_group("nccl")
net = ToyBNNet().cuda()
model = DDP(net)
model.module = nn.SyncBatchNorm.convert_sync_batchnorm(model.module)  # expect: params-added-after-ddp-wrap
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    loss = model(torch.randn(8, 3, 16, 16, device="cuda")).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
