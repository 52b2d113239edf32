"""The printed loss goes through a helper of a package the scan does not have: it may average
it over the ranks or not, so neither logging fact is decided."""
# scan-facts: logs_rank0_only=unknown logged_loss_reduction_wrong=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet
from trainkit.comm import mean_across_ranks

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    x = torch.randn(8, 16, device="cuda")
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    shown = mean_across_ranks(loss.detach())
    if dist.get_rank() == 0:
        print(f"step {step} loss {shown.item():.4f}")  # ok: metric-reduction-wrong, rank0-only-loss-logging
