"""Precision comes from a YAML config loaded into a dataclass; the default is only a fallback."""
# scan-facts: precision=unknown
import argparse
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@dataclass
class TrainConfig:
    lr: float = 3e-4
    epochs: int = 3
    batch_size: int = 32
    dtype: str = "float16"


parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
cli = parser.parse_args()
with open(cli.config) as f:
    cfg = TrainConfig(**yaml.safe_load(f))

dist.init_process_group("nccl")
local_rank = dist.get_rank() % torch.cuda.device_count()
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.dtype]
model = DDP(nn.Linear(64, 8).cuda(local_rank), device_ids=[local_rank])
ds = TensorDataset(torch.randn(4096, 64), torch.randint(0, 8, (4096,)))
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=cfg.batch_size, sampler=sampler)
opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
scaler = torch.cuda.amp.GradScaler(enabled=(cfg.dtype == "float16"))
for epoch in range(cfg.epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        with torch.autocast(device_type="cuda", dtype=ptdtype):
            loss = nn.functional.cross_entropy(model(x.cuda(local_rank)), y.cuda(local_rank))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
