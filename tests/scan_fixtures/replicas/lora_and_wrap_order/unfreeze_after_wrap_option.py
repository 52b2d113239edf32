"""Embeddings unfrozen after the wrap, but only when `--train_text_encoder` is passed (off by
default): whether the run changes trainable parameters after the wrap is the run's choice;
the epoch-driven unfreezing lookalike (unfreeze_after_wrap.py) is decided."""
# scan-facts: module_created_after_wrap=unknown
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--train_text_encoder", action="store_true")
args = parser.parse_args()

dist.init_process_group("nccl")
encoder = ToyNet().cuda()
encoder.requires_grad_(False)
encoder = DDP(encoder)
optimizer = torch.optim.AdamW(encoder.parameters(), lr=1e-4)
for epoch in range(10):
    if args.train_text_encoder:
        encoder.module.body[0].requires_grad_(True)  # ok: params-added-after-ddp-wrap
    for step in range(100):
        loss = encoder(torch.randn(8, 16, device="cuda")).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
