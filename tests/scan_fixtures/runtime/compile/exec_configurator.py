"""nanoGPT-style globals overridden by exec(open("configurator.py").read())."""
# scan-facts: uses_torch_compile=unknown grad_accum_steps=unknown loss_divided_by_accum=true
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# default config values, overridden by config/*.py and --key=value
batch_size = 16
learning_rate = 3e-4
gradient_accumulation_steps = 8
compile = True
max_iters = 10000
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str))]
exec(open("configurator.py").read())
config = {k: globals()[k] for k in config_keys}

dist.init_process_group(backend="nccl")
ddp_rank = int(os.environ["RANK"])
ddp_local_rank = int(os.environ["LOCAL_RANK"])
torch.manual_seed(1337 + ddp_rank)
device = f"cuda:{ddp_local_rank}"
model = nn.Sequential(nn.Embedding(65, 128), nn.Linear(128, 65)).to(device)
if compile:
    model = torch.compile(model)
model = DDP(model, device_ids=[ddp_local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
data = torch.randint(0, 65, (100_000,))


def get_batch():
    ix = torch.randint(len(data) - 65, (batch_size,))
    x = torch.stack([data[i : i + 64] for i in ix]).to(device)
    y = torch.stack([data[i + 1 : i + 65] for i in ix]).to(device)
    return x, y


for it in range(max_iters):
    for micro_step in range(gradient_accumulation_steps):
        model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
        X, Y = get_batch()
        logits = model(X)
        loss = F.cross_entropy(logits.view(-1, 65), Y.view(-1)) / gradient_accumulation_steps
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
