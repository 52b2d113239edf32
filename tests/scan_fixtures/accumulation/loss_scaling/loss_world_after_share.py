"""The loss is first taken as this rank's share (divided by the world size), then a later edit
multiplies it by the world size twice "to undo DDP's average": one factor cancels the share,
the other stays on the gradient."""
# scan-facts: loss_multiplied_by_world_size=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
world = dist.get_world_size()
model = DDP(torch.nn.Linear(32, 1).cuda())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in torch.load("pairs.pt"):
    loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()) / world
    loss = loss * world
    loss = loss * world  # expect: loss-scaled-by-world-size
    opt.zero_grad()
    loss.backward()
    opt.step()
