"""Rewards, an episode count and the loss stacked into one tensor and all-reduced with SUM:
the reward and the loss are divided by the world size where printed, the episode count is a
count (shown as a whole number) and rightly summed. Nothing is logged wrongly."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=false
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
    stats = torch.stack([out.sum(), done.sum(), loss.detach()])
    dist.all_reduce(stats)
    if dist.get_rank() == 0:
        print(  # ok: metric-reduction-wrong
            f"update {update} reward {stats[0].item() / (8 * world_size):.3f} "
            f"episodes {int(stats[1].item())} loss {stats[2].item() / world_size:.4f}"
        )
