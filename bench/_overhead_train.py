"""Training script timed by bench/trace_overhead.py (run with and without the trace agent).

A small transformer language model on random tokens, the usual DDP loop (DistributedSampler,
AdamW, warmup schedule, clipping). Rank 0 writes the per-step wall times to $OVERHEAD_OUT.
"""

import gc
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

STEPS = int(os.environ.get("OVERHEAD_STEPS", "120"))
VOCAB, SEQ, DIM, BATCH = 512, 64, 128, 8


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, 4, 4 * DIM, dropout=0.1, batch_first=True)
        self.body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.out(self.body(self.emb(ids)))


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (STEPS * BATCH * dist.get_world_size(), SEQ + 1), generator=g)
    data = TensorDataset(tokens[:, :-1], tokens[:, 1:])
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    model = DDP(LM())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    times = []
    sampler.set_epoch(0)
    last = time.perf_counter()
    for ids, targets in loader:
        loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        now = time.perf_counter()
        times.append(now - last)
        last = now
    if dist.get_rank() == 0 and os.environ.get("OVERHEAD_OUT"):
        with open(os.environ["OVERHEAD_OUT"], "w") as fh:
            json.dump({"step_seconds": times}, fh)
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
