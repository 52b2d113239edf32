"""Toy translation with an encoder-decoder Transformer (teacher forcing, label smoothing).

The "target language" is the source sentence reversed and mapped through a fixed word
permutation. Sentences have different lengths, so micro-batches carry different numbers of
target tokens; the summed loss of an update is divided by the update's target tokens over
all ranks (the fairseq convention). bf16 autocast, inverse-square-root schedule.
"""

import argparse
import gc
import math
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

PAD, BOS, EOS = 0, 1, 2
VOCAB = 24


def make_corpus(n, seed):
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(VOCAB - 3, generator=torch.Generator().manual_seed(99)) + 3
    pairs = []
    for _ in range(n):
        length = int(torch.randint(2, 14, (1,), generator=g))
        src = torch.randint(3, VOCAB, (length,), generator=g)
        tgt = perm[src.flip(0) - 3]
        pairs.append((torch.cat([src, torch.tensor([EOS])]), torch.cat([torch.tensor([BOS]), tgt, torch.tensor([EOS])])))
    return pairs


class BucketBatchSampler:
    """Batches of sentences of similar length; the batch order is shuffled every epoch with
    the same seed on every rank, and the batches are dealt round-robin to the ranks."""

    def __init__(self, lengths, max_sentences, num_replicas, rank, seed=0):
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        self.batches = [order[i : i + max_sentences] for i in range(0, len(order), max_sentences)]
        self.usable = len(self.batches) // num_replicas * num_replicas
        self.num_replicas, self.rank, self.seed, self.epoch = num_replicas, rank, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        picked = torch.randperm(len(self.batches), generator=g)[: self.usable].tolist()
        return iter([self.batches[i] for i in picked[self.rank :: self.num_replicas]])

    def __len__(self):
        return self.usable // self.num_replicas


def collate(batch):
    src, tgt = zip(*batch)
    return pad_sequence(src, batch_first=True, padding_value=PAD), pad_sequence(tgt, batch_first=True, padding_value=PAD)


class PositionalEncoding(nn.Module):
    def __init__(self, d, max_len=64):
        super().__init__()
        pos = torch.arange(max_len)[:, None]
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x):
        return x + self.pe[: x.shape[1]]


class Translator(nn.Module):
    def __init__(self, d_model=32, heads=4, layers=2):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(d_model)
        self.transformer = nn.Transformer(
            d_model, heads, layers, layers, dim_feedforward=2 * d_model, dropout=0.1, batch_first=True
        )
        self.generator = nn.Linear(d_model, VOCAB, bias=False)
        self.generator.weight = self.tgt_emb.weight
        for emb in (self.src_emb, self.tgt_emb):
            nn.init.normal_(emb.weight, std=d_model**-0.5)
            nn.init.zeros_(emb.weight[PAD])

    def forward(self, src, tgt_in):
        scale = math.sqrt(self.d_model)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], dtype=torch.bool)
        out = self.transformer(
            self.pos(self.src_emb(src) * scale),
            self.pos(self.tgt_emb(tgt_in) * scale),
            tgt_mask=causal,
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=src == PAD,
        )
        return self.generator(out)


def inverse_sqrt(warmup):
    def factor(step):
        step = step + 1
        return min(step / warmup, math.sqrt(warmup / step))

    return factor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-sentences", type=int, default=16)
    ap.add_argument("--update-freq", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup-updates", type=int, default=3)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--clip-norm", type=float, default=1.0)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)

    corpus = make_corpus(256, seed=0)
    sampler = BucketBatchSampler([len(src) for src, _ in corpus], args.max_sentences, world, rank, seed=42)
    loader = DataLoader(corpus, batch_sampler=sampler, collate_fn=collate)

    model = DDP(Translator())
    torch.manual_seed(42 + rank)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=args.label_smoothing, reduction="sum")
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(args.warmup_updates))

    num_updates = 0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        pending = []
        for src, tgt in loader:
            pending.append((src, tgt))
            if len(pending) < args.update_freq:
                continue

            ntokens = torch.tensor(float(sum(int((t[:, 1:] != PAD).sum()) for _, t in pending)))  # fault s2s_micro_ntokens: -
            dist.all_reduce(ntokens)  # fault s2s_local_ntokens: -  # fault s2s_micro_ntokens: -
            logged = torch.zeros(3)
            for k, (src_b, tgt_b) in enumerate(pending):
                tgt_in, tgt_out = tgt_b[:, :-1], tgt_b[:, 1:]
                is_last = k == len(pending) - 1
                with nullcontext() if is_last else model.no_sync():
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        logits = model(src_b, tgt_in)
                    loss_sum = criterion(logits.float().reshape(-1, VOCAB), tgt_out.reshape(-1))
                    (loss_sum * world / ntokens).backward()  # fault s2s_local_ntokens: (loss_sum / ntokens).backward()  # fault s2s_micro_ntokens: micro_tokens = (tgt_out != PAD).sum().float() || dist.all_reduce(micro_tokens) || (loss_sum * world / micro_tokens / args.update_freq).backward()
                correct = ((logits.argmax(-1) == tgt_out) & (tgt_out != PAD)).sum()
                logged += torch.stack([loss_sum.detach(), correct.float(), (tgt_out != PAD).sum().float()])
            pending = []

            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            num_updates += 1

            dist.all_reduce(logged)
            if rank == 0:
                print(
                    f"| epoch {epoch:03d} | update {num_updates:4d} | loss {logged[0] / logged[2] / math.log(2):.3f} "
                    f"| acc {logged[1] / logged[2]:.3f} | gnorm {grad_norm:.3f} | lr {scheduler.get_last_lr()[0]:.2e}"
                )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
