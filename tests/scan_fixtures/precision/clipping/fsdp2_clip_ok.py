"""FSDP2 (fully_shard) with plain torch.nn.utils.clip_grad_norm_: DTensor gradients give the
global norm, so this clipping is right."""
# scan-facts: clip_inside_no_sync=false uses_grad_clipping=true
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.ff(x)


dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = nn.Sequential(*[Block(256) for _ in range(4)]).cuda()
for layer in model:
    fully_shard(layer)
fully_shard(model)
optim = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(100):
    x = torch.randn(8, 256, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # ok: clip-on-local-grads
    optim.step()
    optim.zero_grad()
