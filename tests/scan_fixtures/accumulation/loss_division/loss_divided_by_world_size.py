"""The loss is divided by the world size because DDP was thought to sum the gradients: with
DDP's own average, every step is W times too small (SGD feels it in full)."""
# scan-facts: loss_divided_by_world_size=true loss_multiplied_by_world_size=false
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
world_size = dist.get_world_size()
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(500):
    x = torch.randn(16, 16)
    loss = F.mse_loss(model(x), x) / world_size  # expect: loss-divided-by-world-size
    opt.zero_grad()
    loss.backward()
    opt.step()
