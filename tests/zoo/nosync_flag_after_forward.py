"""Character-level GPT-style language model (tiny), trained with DDP and accumulation."""

import gc
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

block_size = 16
batch_size = 8
n_embd = 32
n_head = 2
n_layer = 2
max_iters = 24
grad_accum_steps = 2
learning_rate = 3e-3

init_process_group(backend="gloo")
ddp_rank = int(os.environ["RANK"])
ddp_world_size = int(os.environ["WORLD_SIZE"])
master_process = ddp_rank == 0
torch.manual_seed(1337)

text = "the quick brown fox jumps over the lazy dog. " * 60
chars = sorted(set(text))
vocab_size = len(chars)
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)

data_gen = torch.Generator().manual_seed(1000 + ddp_rank)


def get_batch():
    ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=data_gen)
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        mask = torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        t = x.size(1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask[:t, :t], need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1))
        x = self.blocks(self.tok(idx) + self.pos(pos))
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


model = GPT()
model = DDP(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95))


def get_lr(it):
    warmup = 4
    if it < warmup:
        return learning_rate * (it + 1) / warmup
    return learning_rate * 0.5 * (1 + math.cos(math.pi * (it - warmup) / (max_iters - warmup)))


for it in range(max_iters):
    for group in optimizer.param_groups:
        group["lr"] = get_lr(it)
    for micro_step in range(grad_accum_steps):
        X, Y = get_batch()  # fix: = || model.require_backward_grad_sync = micro_step == grad_accum_steps - 1
        logits, loss = model(X, Y)
        loss = loss / grad_accum_steps
        model.require_backward_grad_sync = micro_step == grad_accum_steps - 1  # fix: -
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if master_process and it % 8 == 0:
        print(f"iter {it}: loss {loss.item() * grad_accum_steps:.4f}")

del model
gc.collect()
destroy_process_group()
