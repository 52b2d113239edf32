"""nanoGPT-style fixed-length token blocks; ignore_index=-1 is a habit, nothing is padded."""
# scan-facts: variable_length_sequences=unknown
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

block_size = 512
batch_size = 12
gradient_accumulation_steps = 4
dist.init_process_group("nccl")
rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
torch.manual_seed(1337 + rank)
device = f"cuda:{local_rank}"
data = np.memmap("train.bin", dtype=np.uint16, mode="r")


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)


class TinyLM(nn.Module):
    def __init__(self, vocab=50304, d=384):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.out = nn.Linear(d, vocab)

    def forward(self, idx, targets=None):
        logits = self.out(self.emb(idx))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


model = DDP(TinyLM().to(device), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95))
for it in range(5000):
    for micro_step in range(gradient_accumulation_steps):
        model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
        X, Y = get_batch()
        _, loss = model(X, Y)  # ok: accum-token-normalisation
        loss = loss / gradient_accumulation_steps
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
