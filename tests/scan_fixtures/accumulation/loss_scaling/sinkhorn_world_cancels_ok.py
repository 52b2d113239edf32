"""Swapped-prediction clustering: the soft assignments come from a Sinkhorn step without
gradients that divides by the global batch (this rank's batch times the world size) and
multiplies it back at the end, so the targets carry no world-size factor."""
# scan-facts: loss_multiplied_by_world_size=false loss_divided_by_world_size=false
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
world = dist.get_world_size()
model = DDP(torch.nn.Linear(128, 300).cuda())
opt = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.no_grad()
def sinkhorn(scores):
    q = torch.exp(scores / 0.05).t()
    n = q.shape[1] * world
    total = torch.sum(q)
    dist.all_reduce(total)
    q /= total
    for _ in range(3):
        rows = torch.sum(q, dim=1, keepdim=True)
        dist.all_reduce(rows)
        q /= rows
        q /= q.shape[0]
        q /= torch.sum(q, dim=0, keepdim=True)
        q /= n
    q *= n  # ok: loss-scaled-by-world-size
    return q.t()


views = torch.load("views.pt")
for a, b in views:
    out_a, out_b = model(a.cuda()), model(b.cuda())
    with torch.no_grad():
        target = sinkhorn(out_a.detach())
    loss = -torch.mean(torch.sum(target * F.log_softmax(out_b / 0.1, dim=1), dim=1))
    opt.zero_grad()
    loss.backward()
    opt.step()
