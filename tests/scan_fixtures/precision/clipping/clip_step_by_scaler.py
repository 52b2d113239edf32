"""Two train-step functions, picked by whether a GradScaler exists: the one without a scaler
clips plain gradients, the one with it unscales first. The run has a scaler, and where it
scales the loss it unscales before clipping."""

# scan-facts: unscale_before_clip=true uses_grad_scaler=true
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def backward(loss, scaler):
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()


def plain_step(model, opt, x, max_norm):
    loss = model(x).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # ok: clip-before-unscale
    opt.step()


def scaled_step(model, opt, scaler, x, max_norm):
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = model(x).pow(2).mean()
    backward(loss, scaler)
    if scaler is not None:
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # ok: clip-before-unscale
        opt.step()


parser = argparse.ArgumentParser()
parser.add_argument("--clip", type=float, default=1.0)
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")
use_plain = scaler is None
for step in range(1000):
    x = torch.randn(16, 16, device="cuda")
    opt.zero_grad()
    if use_plain:
        plain_step(model, opt, x, args.clip)
    else:
        scaled_step(model, opt, scaler, x, args.clip)
