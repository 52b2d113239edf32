"""Tiny transformer language model with bf16 autocast, warmup and cosine decay."""

import gc
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

VOCAB = 64
SEQ = 16


class Windows(Dataset):
    def __init__(self, n=256):
        g = torch.Generator().manual_seed(1)
        base = torch.randint(0, VOCAB, (n, 1), generator=g)
        self.seqs = (base + torch.arange(SEQ + 1)) % VOCAB

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        s = self.seqs[i]
        return s[:-1], s[1:]


class TinyLM(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        layer = nn.TransformerEncoderLayer(dim, 2, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(dim, VOCAB)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(SEQ), persistent=False)

    def forward(self, ids):
        return self.out(self.body(self.emb(ids), mask=self.causal, is_causal=True))


def cosine_with_warmup(step, warmup=3, total=32):
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / (total - warmup))))


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    ds = Windows()
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_with_warmup)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for ids, targets in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(ids)
            loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {mean.item() / dist.get_world_size():.3f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
