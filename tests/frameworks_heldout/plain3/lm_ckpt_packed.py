"""Small causal LM on packed sequences with activation checkpointing, trained with DDP.

Short synthetic documents are joined with an end-of-document token and cut into fixed
blocks (no padding, so every micro-batch holds the same number of target tokens). Each
transformer block is recomputed in backward (torch.utils.checkpoint, non-reentrant). Two
micro-batches make one update; the first runs under no_sync. AdamW without decay on norms
and biases, linear warmup then cosine, clipping at 1.0.

Launch: torchrun --nproc_per_node 2 lm_ckpt_packed.py
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, Dataset, DistributedSampler

VOCAB, EOD, BLOCK = 40, 0, 32


def synthetic_corpus(n_docs: int, seed: int) -> torch.Tensor:
    """Documents are arithmetic progressions mod VOCAB-1 (tokens 1..VOCAB-1), random length."""
    g = torch.Generator().manual_seed(seed)
    pieces = []
    for _ in range(n_docs):
        start = int(torch.randint(0, VOCAB - 1, (1,), generator=g))
        stride = int(torch.randint(1, 5, (1,), generator=g))
        length = int(torch.randint(4, 20, (1,), generator=g))
        doc = (start + stride * torch.arange(length)) % (VOCAB - 1) + 1
        pieces += [doc, torch.tensor([EOD])]
    return torch.cat(pieces)


class PackedBlocks(Dataset):
    def __init__(self, stream: torch.Tensor) -> None:
        n = (len(stream) - 1) // BLOCK
        self.stream = stream[: n * BLOCK + 1]
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        chunk = self.stream[i * BLOCK : (i + 1) * BLOCK + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, d: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(BLOCK, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)
        self.lm_head.weight = self.tok.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=False) if self.training else block(h)
        return self.lm_head(self.ln_f(h))


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    data = PackedBlocks(synthetic_corpus(700, seed=3))
    sampler = DistributedSampler(data, shuffle=True, seed=17, drop_last=True)
    micro_bs, accum, epochs = 4, 2, 2
    loader = DataLoader(data, batch_size=micro_bs, sampler=sampler, drop_last=True)
    updates_per_epoch = len(loader) // accum
    total, warmup = epochs * updates_per_epoch, 4

    model = DDP(TinyLM())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    rest = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=3e-3,
        betas=(0.9, 0.95),
    )

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    if rank == 0:
        print(f"{len(data)} packed blocks, {updates_per_epoch} updates per epoch", flush=True)

    update = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        batches = iter(loader)
        for _ in range(updates_per_epoch):
            window_loss = torch.zeros(())
            for micro, (x, y) in enumerate(itertools.islice(batches, accum)):  # fmt: skip  # fault lm_zero_grad_micro: = || >opt.zero_grad(set_to_none=True)
                last = micro == accum - 1
                ctx = contextlib.nullcontext() if last else model.no_sync()  # fmt: skip  # fault lm_nosync_last: ctx = model.no_sync() if last else contextlib.nullcontext()
                with ctx:
                    logits = model(x)
                    loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
                    (loss / accum).backward()
                window_loss += loss.detach() / accum
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            update += 1
            if update % 5 == 0:
                dist.all_reduce(window_loss, op=dist.ReduceOp.AVG)  # fault lm_rank0_loss: -
                if rank == 0:
                    print(
                        f"update {update} loss {window_loss.item():.4f} grad-norm {norm.item():.3f} "
                        f"lr {sched.get_last_lr()[0]:.2e}",
                        flush=True,
                    )

    model.eval()
    with torch.no_grad():
        x, y = data[0]
        pred = model.module(x[None]).argmax(-1)[0]
        acc = torch.tensor([(pred == y).float().mean().item()])
        dist.all_reduce(acc, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"next-token accuracy on block 0: {acc.item():.3f}", flush=True)

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
