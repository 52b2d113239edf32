"""A correct 2-rank job whose ranks do not step in lockstep (the trace must not change it).

Phases, each selectable with ``--phases`` (default: all, in this order):

* ``pretrain``: rank 0 alone trains the model for a few steps while rank 1 waits at a barrier;
* ``join``: DDP training with uneven inputs under ``model.join()`` (rank 0 has more batches,
  and the last batches differ in size);
* ``eval``: rank 0 alone evaluates through the inner module, under ``no_grad``;
* ``probe``: rank 1 alone trains a local probe head with an optimizer of its own.

Each rank writes its final loss and a checksum of its parameters to ``$UNEVEN_OUT/rank<R>.json``.
"""

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

PHASES = ("pretrain", "join", "eval", "probe")
parser = argparse.ArgumentParser()
parser.add_argument("--phases", default=",".join(PHASES))
args = parser.parse_args()
phases = [p for p in args.phases.split(",") if p]

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)

g = torch.Generator().manual_seed(1)
features = torch.randn(256, 12, generator=g)
targets = features @ torch.randn(12, 1, generator=g)
net = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 1))
last_loss = float("nan")

if "pretrain" in phases:
    if rank == 0:
        local_opt = torch.optim.SGD(net.parameters(), lr=0.05)
        for i in range(6):
            local_opt.zero_grad()
            loss = F.mse_loss(net(features[i * 16 : (i + 1) * 16]), targets[i * 16 : (i + 1) * 16])
            loss.backward()
            local_opt.step()
            last_loss = loss.item()
    dist.barrier()  # rank 1 waits here while rank 0 pre-trains

model = DDP(net)  # broadcasts rank 0's (pre-trained) weights
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

if "join" in phases:
    batches = 7 if rank == 0 else 5  # uneven inputs: rank 1 runs out first
    offset = 96 + rank * 70
    with model.join():
        for i in range(batches):
            lo = offset + i * 10
            size = 10 if i < batches - 1 else 4 + rank  # uneven last batches too
            x, y = features[lo : lo + size], targets[lo : lo + size]
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            last_loss = loss.item()

if "eval" in phases:
    if rank == 0:
        with torch.no_grad():
            eval_loss = F.mse_loss(model.module(features[:64]), targets[:64]).item()
        print(f"eval loss {eval_loss:.5f}")
    dist.barrier()

if "probe" in phases:
    if rank == 1:
        head = nn.Linear(12, 1)
        head_opt = torch.optim.SGD(head.parameters(), lr=0.1)
        for i in range(4):
            head_opt.zero_grad()
            F.mse_loss(head(features[i * 8 : (i + 1) * 8]), targets[i * 8 : (i + 1) * 8]).backward()
            head_opt.step()
    dist.barrier()

checksum = sum(float(p.detach().double().sum()) for p in model.module.parameters())
out = os.environ.get("UNEVEN_OUT")
if out:
    record = {"rank": rank, "loss": last_loss, "checksum": checksum}
    Path(out, f"rank{rank}.json").write_text(json.dumps(record))
print(f"rank {rank}: loss {last_loss:.6f} checksum {checksum:.10f}")
dist.destroy_process_group()
