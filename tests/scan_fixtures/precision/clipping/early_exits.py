"""A step loop that leaves early (max iters, a NaN check, an eval-only run): clipping and
zero_grad after those checks still run on every step."""
# scan-facts: uses_grad_clipping=true zero_grad_every_micro_step=false
import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

max_iters = 2000
eval_only = False
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(nn.Linear(128, 128).cuda(local_rank), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ds = TensorDataset(torch.randn(8192, 128))
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=64, sampler=sampler, drop_last=True)

iter_num = 0
epoch = 0
while True:
    sampler.set_epoch(epoch)
    for (x,) in loader:
        if iter_num == 0 and eval_only:
            break
        x = x.cuda(local_rank)
        loss = (model(x) - x).pow(2).mean()
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"loss is {loss.item()} at step {iter_num}")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # ok: grad-clip-missing
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        if iter_num > max_iters:
            dist.destroy_process_group()
            sys.exit(0)
    epoch += 1
