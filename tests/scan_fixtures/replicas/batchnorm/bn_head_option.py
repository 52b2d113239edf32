"""A projection head that adds BatchNorm only when an option asks (off by default), and a
SyncBatchNorm conversion guarded by a helper that looks for BatchNorm layers: neither the
BatchNorm nor the conversion is certain to exist."""
# scan-facts: has_batchnorm=unknown uses_syncbn=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from projutils import has_batchnorms


class Head(nn.Module):
    def __init__(self, in_dim, out_dim, use_bn=False, hidden=256):
        super().__init__()
        layers = [nn.Linear(in_dim, hidden)]
        if use_bn:
            layers.append(nn.BatchNorm1d(hidden))
        layers += [nn.GELU(), nn.Linear(hidden, out_dim)]
        self.mlp = nn.Sequential(*layers)

    def forward(self, x):
        return self.mlp(x)


parser = argparse.ArgumentParser()
parser.add_argument("--use_bn_in_head", action="store_true")
parser.add_argument("--out_dim", type=int, default=1024)
args = parser.parse_args()

dist.init_process_group("nccl")
model = Head(384, args.out_dim, use_bn=args.use_bn_in_head).cuda()
if has_batchnorms(model):
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)  # ok: batchnorm-without-syncbn
model = DDP(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
for step in range(1000):
    x = torch.randn(64, 384, device="cuda")
    loss = model(x).logsumexp(dim=-1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
