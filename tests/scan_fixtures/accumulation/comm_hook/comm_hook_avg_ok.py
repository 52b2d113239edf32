"""A hand-written all-reduce hook that divides by the group size, like the stock one."""
# scan-facts: uses_comm_hook=true comm_hook_averages=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def mean_hook(process_group, bucket):
    group = process_group or dist.group.WORLD
    tensor = bucket.buffer().div_(group.size())  # ok: custom-comm-hook-scaling
    return dist.all_reduce(tensor, group=group, async_op=True).get_future().then(lambda f: f.value()[0])


dist.init_process_group("gloo")
model = DDP(ToyNet())
model.register_comm_hook(None, mean_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(100):
    loss = model(torch.randn(4, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
