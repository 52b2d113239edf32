"""Random token windows drawn by hand; the seed is the same constant on every rank."""
# scan-facts: uses_distributed_sampler=false rank_seeds_identical=true
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="nccl")
local_rank = int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", local_rank)
torch.cuda.set_device(device)
torch.manual_seed(42)

train_data = np.memmap(os.path.join("data", "train.bin"), dtype=np.uint16, mode="r")
ctx_len, bsz = 256, 16


def sample_batch():
    starts = torch.randint(len(train_data) - ctx_len - 1, (bsz,))  # expect: no-distributed-sampler
    x = torch.stack([torch.from_numpy(train_data[s : s + ctx_len].astype(np.int64)) for s in starts])
    y = torch.stack([torch.from_numpy(train_data[s + 1 : s + 1 + ctx_len].astype(np.int64)) for s in starts])
    return x.to(device), y.to(device)


class Bigram(nn.Module):
    def __init__(self, vocab=50257):
        super().__init__()
        self.table = nn.Embedding(vocab, vocab)

    def forward(self, x):
        return self.table(x)


model = DDP(Bigram().to(device), device_ids=[local_rank])
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(20_000):
    xb, yb = sample_batch()
    logits = model(xb)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), yb.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
