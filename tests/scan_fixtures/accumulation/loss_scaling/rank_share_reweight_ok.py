"""Ranks with uneven batches weight their loss by world_size * local / global (timm's naflex
loop): the factor is a rank's share of the global batch, about 1, not a world-size scale-up."""
# scan-facts: loss_multiplied_by_world_size=false
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
world_size = dist.get_world_size()
model = DDP(ToyNet())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(1000):
    x = torch.randn(8 + dist.get_rank(), 16)
    local = torch.tensor(float(x.shape[0]))
    total = local.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    share = world_size * x.shape[0] / total
    pred = model(x)
    loss = F.mse_loss(pred, torch.zeros_like(pred)) * share
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
