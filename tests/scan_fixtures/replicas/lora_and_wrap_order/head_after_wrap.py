"""A new head and an unfrozen layer, both after wrapping."""
# scan-facts: module_created_after_wrap=true uses_lora=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
net = ToyNet()
for p in net.parameters():
    p.requires_grad = False  # ok: params-added-after-ddp-wrap
model = DDP(net, find_unused_parameters=True)
model.module.classifier = nn.Linear(16, 5)  # expect: params-added-after-ddp-wrap
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(50):
    x = torch.randn(4, 16)
    loss = model.module.classifier(model(x)).logsumexp(-1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
