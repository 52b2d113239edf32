"""An autocast context bound once with functools.partial and entered each step: bf16 mixed
precision, whatever name the partial goes by."""

# scan-facts: precision=bf16_amp
from functools import partial

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def make_context():
    return partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16)


dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
amp_ctx = make_context()
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    with amp_ctx():
        loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
