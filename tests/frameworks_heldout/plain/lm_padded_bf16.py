"""Tiny causal transformer LM on variable-length random-walk token sequences.

Batches are right-padded (PAD_ID is ignored by the loss). bf16 autocast on CPU, AdamW,
linear warmup + cosine.

    torchrun --nproc_per_node 2 lm_padded_bf16.py
"""

import argparse
import gc
import math
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

PAD_ID = 0
VOCAB_SIZE = 48


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)  # fault lm_short_warmup: p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--warmup_steps", type=int, default=6)  # fault lm_short_warmup: p.add_argument("--warmup_steps", type=int, default=2)
    p.add_argument("--weight_decay", type=float, default=0.1)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--n_seq", type=int, default=160)
    p.add_argument("--max_len", type=int, default=33)
    return p.parse_args()


class RandomWalkTokens(Dataset):
    """Sequences where each token is the previous one plus a small random step."""

    def __init__(self, n, max_len, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.seqs = []
        for _ in range(n):
            length = int(torch.randint(6, max_len + 1, (1,), generator=g))
            steps = torch.randint(-2, 3, (length,), generator=g)
            start = torch.randint(1, VOCAB_SIZE, (1,), generator=g)
            seq = (start + torch.cumsum(steps, 0) - 1) % (VOCAB_SIZE - 1) + 1
            self.seqs.append(seq)

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        return self.seqs[i]


def pad_collate(batch):
    longest = max(len(s) for s in batch)
    out = torch.full((len(batch), longest), PAD_ID, dtype=torch.long)
    for i, s in enumerate(batch):
        out[i, : len(s)] = s
    return out


class TinyLM(nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, d_model=64, n_heads=4, n_layers=2, max_len=64):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=PAD_ID)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=idx.device), diagonal=1)
        x = self.blocks(x, mask=causal, src_key_padding_mask=idx.eq(PAD_ID))
        return self.lm_head(self.ln_f(x))


def warmup_cosine(warmup, total):
    def fn(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return fn


def main():
    args = get_args()
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1337)

    dataset = RandomWalkTokens(args.n_seq, args.max_len)
    sampler = DistributedSampler(dataset, shuffle=True, seed=1337)
    loader = DataLoader(
        dataset, batch_size=args.batch_size, sampler=sampler, collate_fn=pad_collate
    )

    model = TinyLM()  # fault lm_bf16_weights: model = TinyLM().to(torch.bfloat16)
    model = DDP(model)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "emb" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "emb" in n]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    total_steps = args.epochs * len(loader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(args.warmup_steps, total_steps)
    )
    autocast = torch.autocast(device_type="cpu", dtype=torch.bfloat16)

    step, tokens_seen, t0 = 0, 0, time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for batch in loader:
            inputs, targets = batch[:, :-1], batch[:, 1:]
            n_tokens = targets.ne(PAD_ID).sum().float()
            global_tokens = n_tokens.clone()
            dist.all_reduce(global_tokens)
            tokens_seen += int(global_tokens.item())

            with autocast:
                logits = model(inputs)
            loss_sum = F.cross_entropy(
                logits.float().reshape(-1, VOCAB_SIZE),
                targets.reshape(-1),
                ignore_index=PAD_ID,
                reduction="sum",
            )
            loss = loss_sum * world_size / global_tokens  # fault lm_token_mean: loss = loss_sum / n_tokens

            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
            optimizer.step()
            scheduler.step()
            step += 1

            logged = loss_sum.detach().clone()
            dist.all_reduce(logged)
            if rank == 0:
                print(
                    f"step {step:3d} | loss {(logged / global_tokens).item():.4f} | "
                    f"lr {scheduler.get_last_lr()[0]:.2e} | grad_norm {norm.item():.3f} | "
                    f"tokens {tokens_seen} | {time.time() - t0:.1f}s"
                )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
