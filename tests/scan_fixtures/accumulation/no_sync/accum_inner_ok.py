"""Inner micro-batch loop with a correct no_sync window (accelerate-free, by hand)."""
# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true zero_grad_every_micro_step=false
# scan-facts: uses_no_sync=true final_micro_step_synced=true clip_inside_no_sync=false
# scan-facts: scheduler_steps_per_optimizer_step=1.0 extra_backward_through_ddp=false
import contextlib

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


class Config:
    micro_batches = 4
    total_steps = 1000
    lr = 1e-3


def train_step(model, optimizer, scheduler, batch, cfg):
    chunks = batch.chunk(cfg.micro_batches)
    for k in range(cfg.micro_batches):
        sync = k == cfg.micro_batches - 1
        with model.no_sync() if not sync else contextlib.nullcontext():  # ok: no-sync-misaligned
            pred = model(chunks[k])
            loss = F.mse_loss(pred, torch.zeros_like(pred)) / cfg.micro_batches  # ok: grad-accum-loss-not-scaled
            loss.backward()  # ok: extra-backward-through-ddp
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # ok: clip-on-local-grads
    optimizer.step()
    scheduler.step()  # ok: scheduler-step-miscounted
    optimizer.zero_grad()  # ok: zero-grad-inside-accumulation


def main():
    dist.init_process_group("gloo")
    cfg = Config()
    model = DDP(ToyNet())
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.total_steps)
    for step in range(cfg.total_steps):
        batch = torch.randn(32, 16)
        train_step(model, optimizer, scheduler, batch, cfg)


main()
