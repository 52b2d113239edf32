"""nanoGPT-style loop done right: the flag is set before the forward."""
# scan-facts: grad_accum_steps=4 uses_no_sync=true final_micro_step_synced=true precision=bf16_amp
# scan-facts: uses_grad_scaler=false warmup_steps=0 lr_scaling=unknown uses_torch_compile=false
import os

import torch
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from _gpt import GPT, GPTConfig

gradient_accumulation_steps = 4
learning_rate = 3e-4
compile = False

init_process_group(backend="nccl")
ddp_local_rank = int(os.environ["LOCAL_RANK"])
model = GPT(GPTConfig()).cuda()
if compile:
    model = torch.compile(model)  # ok: torch-compile-ddp-interaction
model = DDP(model, device_ids=[ddp_local_rank])
raw_model = model.module
optimizer = raw_model.configure_optimizers(0.1, learning_rate, (0.9, 0.95), "cuda")
ctx = torch.autocast(device_type="cuda", dtype=torch.bfloat16)


def get_batch():
    data = torch.randint(0, 50304, (8, 257))
    return data[:, :-1].cuda(), data[:, 1:].cuda()


for it in range(5000):
    for micro_step in range(gradient_accumulation_steps):
        model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1  # ok: no-sync-misaligned
        X, Y = get_batch()
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
