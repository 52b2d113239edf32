"""Mixed precision by hand: bf16 weights for forward and backward, an fp32 copy of each kept
beside it and swapped into ``p.data`` around every optimizer step. The dtypes are the project's
own bookkeeping, so the precision is not decided (it is neither fp32 nor pure bf16)."""
# scan-facts: precision=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def keep_master_copies(params, low):
    with torch.no_grad():
        for p in params:
            p.master = p.detach().clone().float()
            p.data = p.data.to(low)


def to_master(params):
    for p in params:
        if p.grad is not None:
            p.low = p.data
            p.data = p.master
            p.grad = p.grad.float()


def to_low(params, low):
    for p in params:
        if p.grad is not None:
            p.low.copy_(p.data)
            p.data = p.low
            p.grad = p.grad.to(low)


dist.init_process_group("nccl")
net = DDP(ToyNet().cuda())
keep_master_copies(net.parameters(), torch.bfloat16)
opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
for step in range(500):
    x = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16)
    loss = net(x).float().pow(2).mean()  # ok: pure-low-precision-weights
    opt.zero_grad()
    loss.backward()
    to_master(net.parameters())
    opt.step()
    to_low(net.parameters(), torch.bfloat16)
