"""build-nanogpt before its fix: the accumulation count comes from the world size (not a
constant) and the sync flag is set after the forward, too late for the last micro-step."""
# scan-facts: uses_no_sync=true final_micro_step_synced=false loss_divided_by_accum=true
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _gpt import GPT, GPTConfig

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    dist.init_process_group("nccl")
    world_size = int(os.environ["WORLD_SIZE"])
else:
    world_size = 1
total_batch_size = 524288
B, T = 16, 1024
grad_accum_steps = total_batch_size // (B * T * world_size)
model = GPT(GPTConfig())
if ddp:
    model = DDP(model, device_ids=[int(os.environ["LOCAL_RANK"])])
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
for step in range(5000):
    optimizer.zero_grad()
    for micro_step in range(grad_accum_steps):
        x = torch.randint(0, 50304, (B, T))
        logits, loss = model(x, x)
        loss = loss / grad_accum_steps
        if ddp:
            model.require_backward_grad_sync = micro_step == grad_accum_steps - 1  # expect: no-sync-misaligned
        loss.backward()
    optimizer.step()
