"""A config dataclass whose fields the command line overwrites through setattr() over its
keyword arguments: `use_fp16 = False` is only a default. Autocast and the GradScaler hang on
it, so neither the precision nor the scaler is decided."""
# scan-facts: precision=unknown uses_grad_scaler=unknown
from contextlib import nullcontext
from dataclasses import dataclass

import fire
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


@dataclass
class TrainConfig:
    use_fp16: bool = False
    lr: float = 1e-4


def update_config(config, **kwargs):
    if isinstance(config, (tuple, list)):
        for c in config:
            update_config(c, **kwargs)
    else:
        for k, v in kwargs.items():
            if hasattr(config, k):
                setattr(config, k, v)


def main(**kwargs):
    cfg = TrainConfig()
    update_config((cfg,), **kwargs)
    dist.init_process_group("nccl")
    model = DDP(ToyNet().cuda())
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    scaler = None
    if cfg.use_fp16:
        scaler = torch.amp.GradScaler("cuda")
    autocast = torch.autocast if cfg.use_fp16 else nullcontext
    for step in range(1000):
        x = torch.randn(32, 16, device="cuda")
        with autocast("cuda"):
            loss = F.mse_loss(model(x), x)
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    fire.Fire(main)
