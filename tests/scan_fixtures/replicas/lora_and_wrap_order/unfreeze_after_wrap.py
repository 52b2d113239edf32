"""Gradual unfreezing after the wrap: DDP's reducer never learns about these parameters."""
# scan-facts: module_created_after_wrap=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
net = ToyNet()
net.body[0].requires_grad_(False)
model = DDP(net)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for epoch in range(4):
    if epoch == 2:
        for p in model.module.body[0].parameters():
            p.requires_grad = True  # expect: params-added-after-ddp-wrap
    for step in range(20):
        loss = model(torch.randn(4, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
