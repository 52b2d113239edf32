"""Each rank seeds with seed + rank, and reads its own slice of a token file by offset."""
# scan-facts: rank_seeds_identical=false uses_distributed_sampler=true
import argparse
import os
import random

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--steps", type=int, default=1000)
args = parser.parse_args()

dist.init_process_group("nccl")
ddp_rank = int(os.environ["RANK"])
ddp_local_rank = int(os.environ["LOCAL_RANK"])
world = int(os.environ["WORLD_SIZE"])
device = f"cuda:{ddp_local_rank}"
torch.manual_seed(args.seed + ddp_rank)  # ok: augmentation-rng-identical-across-ranks
random.seed(args.seed + ddp_rank)
np.random.seed(args.seed + ddp_rank)

tokens = np.memmap("train.bin", dtype=np.uint16, mode="r")
B, T = 8, 256
position = B * T * ddp_rank


def next_batch():
    global position
    buf = torch.from_numpy(tokens[position : position + B * T + 1].astype(np.int64))
    x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
    position += B * T * world
    if position + B * T * world + 1 > len(tokens):
        position = B * T * ddp_rank
    return x.to(device), y.to(device)


model = DDP(nn.Sequential(nn.Embedding(50304, 256), nn.Linear(256, 50304)).to(device), device_ids=[ddp_local_rank])
opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95))
for step in range(args.steps):
    x, y = next_batch()
    if random.random() < 0.1:
        x = x.flip(1)
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
