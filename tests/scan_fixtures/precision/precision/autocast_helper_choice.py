"""The autocast context comes from a helper that picks it from `--precision`: a null context
for fp32, autocast in fp16 or bf16 otherwise. The run's option decides which one the forward
runs under, so the precision is not decided (not the helper's first branch)."""

# scan-facts: precision=unknown
import argparse
from contextlib import suppress
from functools import partial

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def get_autocast(precision, fsdp=False):
    if fsdp:
        return suppress
    if precision == "amp":
        dtype = torch.float16
    elif precision == "amp_bf16":
        dtype = torch.bfloat16
    else:
        return suppress
    return partial(torch.autocast, device_type="cuda", dtype=dtype)


parser = argparse.ArgumentParser()
parser.add_argument("--precision", default="amp", choices=["amp", "amp_bf16", "fp32"])
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
autocast = get_autocast(args.precision)
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    with autocast():
        loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
