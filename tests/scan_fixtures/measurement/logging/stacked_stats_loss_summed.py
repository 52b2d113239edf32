"""The same stacked statistics, the loss entry printed without the division: the sum of
the ranks' losses, W times the mean."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
world_size = dist.get_world_size()
model = DDP(ToyNet())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for update in range(100):
    out = model(torch.randn(8, 16))
    done = (out > 0).float()
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    stats = torch.stack([done.sum(), loss.detach()])
    dist.all_reduce(stats)
    if dist.get_rank() == 0:
        print(f"update {update} episodes {int(stats[0].item())} loss {stats[1].item():.4f}")  # expect: metric-reduction-wrong
