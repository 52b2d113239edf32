"""The weights are put in bf16 by a helper that rewrites each parameter's data, then trained
with plain AdamW on them: the same as ``model.bfloat16()``."""
# scan-facts: precision=pure_bf16
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def to_low_precision(params, dtype):
    with torch.no_grad():
        for p in params:
            p.data = p.data.to(dtype)  # expect: pure-low-precision-weights


dist.init_process_group("nccl")
net = ToyNet().cuda()
to_low_precision(net.parameters(), torch.bfloat16)
net = DDP(net)
opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
for step in range(500):
    x = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16)
    loss = net(x).float().pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
