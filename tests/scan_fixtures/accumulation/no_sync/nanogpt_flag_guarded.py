"""nanoGPT's own shape: the flag is set only `if ddp:` and the accumulation count is divided by
the world size at run time; here the flag is flipped after the forward (too late)."""
# scan-facts: uses_no_sync=true final_micro_step_synced=false loss_divided_by_accum=true
import os

import torch
import torch.nn as nn
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

gradient_accumulation_steps = 8
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="nccl")
    ddp_world_size = int(os.environ["WORLD_SIZE"])
    device = f"cuda:{os.environ['LOCAL_RANK']}"
    gradient_accumulation_steps //= ddp_world_size
else:
    device = "cuda"

model = nn.Linear(64, 64).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
if ddp:
    model = DDP(model)


def get_batch():
    x = torch.randn(12, 64, device=device)
    return x, x


X, Y = get_batch()
for iter_num in range(1000):
    for micro_step in range(gradient_accumulation_steps):
        loss = nn.functional.mse_loss(model(X), Y)
        loss = loss / gradient_accumulation_steps
        if ddp:
            model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1  # expect: no-sync-misaligned
        X, Y = get_batch()
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
