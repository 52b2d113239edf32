"""No DDP: the gradients are summed by hand over the ranks and the loss was divided by the world
size first, which together give the average; the division is no fault here."""
# scan-facts: loss_divided_by_world_size=unknown comm_hook_averages=true
import torch
import torch.distributed as dist
import torch.nn.functional as F

from _toy import ToyNet

dist.init_process_group("gloo")
world_size = dist.get_world_size()
model = ToyNet()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(500):
    x = torch.randn(16, 16)
    loss = F.mse_loss(model(x), x) / world_size  # ok: loss-divided-by-world-size
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
    opt.step()
