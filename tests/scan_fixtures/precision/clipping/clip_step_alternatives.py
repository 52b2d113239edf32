"""Two train-step functions picked by a command-line option, both scaling the loss: one
unscales before clipping, the other clips the scaled gradients. Which one runs is the run's
choice, so whether it unscales first is not decided."""

# scan-facts: unscale_before_clip=unknown uses_grad_scaler=true
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def careful_step(model, opt, scaler, loss):
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()


def fast_step(model, opt, scaler, loss):
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()


parser = argparse.ArgumentParser()
parser.add_argument("--fast", action="store_true")
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")
step_fn = fast_step if args.fast else careful_step
for step in range(1000):
    x = torch.randn(16, 16, device="cuda")
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = model(x).pow(2).mean()
    opt.zero_grad()
    step_fn(model, opt, scaler, loss)
