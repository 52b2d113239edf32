"""A tiny character-level GPT trained the nanoGPT way: a hand loop over random offsets into an
in-memory token array, gradient accumulation with the sync flag on the last micro step, a
cosine learning-rate schedule and a GradScaler that is a no-op in float32."""

import argparse
import gc
import math
import os
import time
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x):
        t = x.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_embd, n_head):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
        return logits, loss


parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=8)
parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
args = parser.parse_args()

batch_size = 12
block_size = 16
learning_rate = 6e-4
min_lr = 6e-5
warmup_iters = 2
lr_decay_iters = args.max_iters
eval_iters = 2
eval_interval = 4
grad_clip = 1.0
dtype = "float32"
device = "cpu"

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="gloo")
    ddp_rank = int(os.environ["RANK"])
    ddp_world_size = int(os.environ["WORLD_SIZE"])
    master_process = ddp_rank == 0
    seed_offset = ddp_rank
    assert args.gradient_accumulation_steps % ddp_world_size == 0
    gradient_accumulation_steps = args.gradient_accumulation_steps // ddp_world_size
else:
    master_process = True
    seed_offset = 0
    ddp_world_size = 1
    gradient_accumulation_steps = args.gradient_accumulation_steps
torch.manual_seed(1337 + seed_offset)
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = (
    nullcontext()
    if device_type == "cpu"
    else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
)

# an in-memory token stream stands in for train.bin / val.bin
rs = np.random.RandomState(0)
text = rs.randint(0, 65, size=20000).astype(np.uint16)
train_data = text[:18000]
val_data = text[18000:]


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack(
        [torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix]
    )
    return x.to(device), y.to(device)


model = GPT(vocab_size=65, block_size=block_size, n_layer=2, n_embd=32, n_head=2)  # fault nanogpt_compiled: model = GPT(vocab_size=65, block_size=block_size, n_layer=4, n_embd=96, n_head=2)  # fault nanogpt_compiled_sync_flag_late: model = GPT(vocab_size=65, block_size=block_size, n_layer=4, n_embd=96, n_head=2)
model.to(device)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == "float16"))
optimizer = torch.optim.AdamW(
    model.parameters(), lr=learning_rate, betas=(0.9, 0.95), weight_decay=0.1
)
if ddp:  # fault nanogpt_compiled: model = torch.compile(model, backend="aot_eager") || =  # fault nanogpt_compiled_sync_flag_late: model = torch.compile(model, backend="aot_eager") || =
    model = DDP(model)  # fault nanogpt_compiled: model = DDP(model, bucket_cap_mb=1)  # fault nanogpt_compiled_sync_flag_late: model = DDP(model, bucket_cap_mb=1)
raw_model = model.module if ddp else model


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                _, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


X, Y = get_batch("train")
t0 = time.time()
iter_num = 0
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if iter_num % eval_interval == 0 and master_process:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    for micro_step in range(gradient_accumulation_steps):
        if ddp:  # fault nanogpt_sync_flag_late: -  # fault nanogpt_compiled_sync_flag_late: -
            model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1  # fault nanogpt_sync_flag_late: -  # fault nanogpt_compiled_sync_flag_late: -
        with ctx:
            logits, loss = model(X, Y)  # fault nanogpt_raw_model_forward: logits, loss = raw_model(X, Y)
            loss = loss / gradient_accumulation_steps  # fault nanogpt_sync_flag_late: = || <if ddp: || model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1  # fault nanogpt_accum_not_divided: -  # fault nanogpt_compiled_sync_flag_late: = || <if ddp: || model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if master_process:
        lossf = loss.item() * gradient_accumulation_steps
        print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms")
    iter_num += 1
    if iter_num > args.max_iters:
        break

if ddp:
    del model, raw_model
    gc.collect()
    destroy_process_group()
