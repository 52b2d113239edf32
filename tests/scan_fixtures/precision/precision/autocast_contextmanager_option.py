"""The forward runs under a project ``@contextmanager`` helper that opens torch's autocast
around its ``yield`` with the keywords it is handed; the run's ``--use-fp16`` decides them.
The helper's context is autocast, so "no autocast: fp32" is not concluded; its flag is an
option, so the precision is not decided."""

# scan-facts: precision=unknown
import argparse
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


@contextmanager
def amp_context(device_type="cuda", **kwargs):
    with torch.amp.autocast(device_type=device_type, **kwargs):
        yield


parser = argparse.ArgumentParser()
parser.add_argument("--use-fp16", type=int, default=0)
args = parser.parse_args()
if args.use_fp16:
    dtype, use_amp = torch.float16, True
else:
    dtype, use_amp = torch.float32, False

dist.init_process_group("nccl")
rank = dist.get_rank()
model = DDP(ToyNet().cuda(rank), device_ids=[rank])
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(4):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda(rank)
        with amp_context(enabled=use_amp, dtype=dtype):
            loss = F.mse_loss(model(x), x)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
