"""The logged loss is summed over the ranks only when a command-line flag asks for it: whether
the printed value is reduced is not decided by the code."""
# scan-facts: logs_rank0_only=unknown logged_loss_reduction_wrong=unknown
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--sync_logs", action="store_true")
args = parser.parse_args()
dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    x = torch.randn(8, 16, device="cuda")
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    shown = loss.detach().clone()
    if args.sync_logs:
        dist.all_reduce(shown, op=dist.ReduceOp.SUM)
    if dist.get_rank() == 0:
        print(f"step {step} loss {shown.item():.4f}")  # ok: metric-reduction-wrong
