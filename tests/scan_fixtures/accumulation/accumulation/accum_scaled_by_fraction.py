"""Four micro-steps whose loss is multiplied by a quarter: the same as dividing it by four."""

# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
model = DDP(ToyNet())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(1000):
    for micro in range(4):
        pred = model(torch.randn(8, 16))
        loss = F.mse_loss(pred, torch.zeros_like(pred)) * 0.25
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
