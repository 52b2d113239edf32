"""A project's own reduce helper (mean by default: each rank's share divided by the world size,
then summed) called with its default: the mean over the ranks."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


class Comm:
    def __init__(self):
        dist.init_process_group("nccl")
        self.world_size = dist.get_world_size()

    def reduce_metrics(self, metrics, op="mean"):
        out = {}
        for name, value in metrics.items():
            t = torch.tensor([value], device="cuda")
            if op == "mean":
                t /= self.world_size
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            out[name] = t.item()
        return out


comm = Comm()
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(200):
    x = torch.randn(16, 16, device="cuda")
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    shown = comm.reduce_metrics({"train_loss": loss.item()})
    if dist.get_rank() == 0:
        print(step, shown)  # ok: metric-reduction-wrong, rank0-only-loss-logging
