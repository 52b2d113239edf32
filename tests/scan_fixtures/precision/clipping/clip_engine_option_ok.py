"""An engine option picks FSDP or plain DDP (DDP by default); torch's clip runs on the DDP
path and the FSDP wrapper's own clip on the other. Whether the gradients torch's clip
measures are shards is the run's choice, so clip_inside_no_sync stays undecided."""
# scan-facts: clip_inside_no_sync=unknown
import argparse

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--engine", default="ddp", choices=["ddp", "fsdp"])
args = parser.parse_args()

dist.init_process_group("gloo")
model = ToyNet()
if args.engine == "fsdp":
    model = FSDP(model)
else:
    model = DDP(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(100):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    if args.engine == "ddp":
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # ok: clip-on-local-grads
    else:
        model.clip_grad_norm_(5.0)
    optimizer.step()
    optimizer.zero_grad()
