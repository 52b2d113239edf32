"""nanoGPT-style loop where the sync flag is flipped after the forward (too late)."""
# scan-facts: grad_accum_steps=8 uses_no_sync=true final_micro_step_synced=false
# scan-facts: loss_divided_by_accum=true zero_grad_every_micro_step=false warmup_steps=2000
# scan-facts: optimizer_family=adam adam_beta2=0.95 uses_torch_compile=true precision=unknown
# scan-facts: uses_grad_scaler=unknown uses_distributed_sampler=unknown
import math
import os

import torch
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from _gpt import GPT, GPTConfig

gradient_accumulation_steps = 8
learning_rate = 6e-4
warmup_iters = 2000
lr_decay_iters = 600000
min_lr = 6e-5
max_iters = 600000
compile = True

init_process_group(backend="nccl")
ddp_rank = int(os.environ["RANK"])
ddp_local_rank = int(os.environ["LOCAL_RANK"])
device = f"cuda:{ddp_local_rank}"
master_process = ddp_rank == 0
torch.manual_seed(1337 + ddp_rank)
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = torch.amp.autocast(device_type="cuda", dtype=ptdtype)

model = GPT(GPTConfig())
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.95), "cuda")
if compile:
    model = torch.compile(model)  # expect: torch-compile-ddp-interaction
model = DDP(model, device_ids=[ddp_local_rank])


def get_batch(split):
    data = torch.randint(0, 50304, (12, 1025))
    return data[:, :-1].to(device), data[:, 1:].to(device)


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


X, Y = get_batch("train")
iter_num = 0
while iter_num < max_iters:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    for micro_step in range(gradient_accumulation_steps):
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1  # expect: no-sync-misaligned
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    iter_num += 1
