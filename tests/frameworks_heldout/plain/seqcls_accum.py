"""GRU sequence classifier with gradient accumulation over micro-batches.

Label = which of four marker tokens occurs most often in the sequence.
Run: torchrun --nproc_per_node 2 seqcls_accum.py --accum_steps 4
"""

import argparse
import gc
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

VOCAB = 32
MARKERS = (3, 7, 11, 19)
N_CLASSES = len(MARKERS)


class MarkerCountDataset(Dataset):
    def __init__(self, size, seq_len=24, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(1, VOCAB, (size, seq_len), generator=g)
        counts = torch.stack([(self.x == m).sum(1) for m in MARKERS], dim=1)
        self.y = counts.argmax(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class GRUClassifier(nn.Module):
    def __init__(self, vocab=VOCAB, emb=32, hidden=48, n_classes=N_CLASSES):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(2 * hidden, n_classes)

    def forward(self, tokens):
        out, _ = self.gru(self.embed(tokens))
        pooled = out.max(dim=1).values
        return self.fc(self.dropout(pooled))


def linear_warmup_decay(warmup, total):
    def lr_lambda(step):
        if step < warmup:
            return float(step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return lr_lambda


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--micro_batch_size", type=int, default=4)
    parser.add_argument("--accum_steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup_steps", type=int, default=2)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--train_size", type=int, default=320)
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)

    train_ds = MarkerCountDataset(args.train_size)
    sampler = DistributedSampler(train_ds)
    loader = DataLoader(train_ds, batch_size=args.micro_batch_size, sampler=sampler, drop_last=True)

    model = DDP(GRUClassifier())
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)  # fault seqcls_lr_scaled: optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr * world_size * args.accum_steps, weight_decay=0.01)
    updates_per_epoch = len(loader) // args.accum_steps
    total_updates = args.epochs * updates_per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, linear_warmup_decay(args.warmup_steps, total_updates)
    )
    if rank == 0:
        print(f"world_size={world_size} local_rank={local_rank} updates={total_updates}")

    global_step = 0
    running = torch.zeros(())
    optimizer.zero_grad(set_to_none=True)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for i, (tokens, labels) in enumerate(loader):
            sync_now = (i + 1) % args.accum_steps == 0
            ctx = nullcontext() if sync_now else model.no_sync()  # fault seqcls_nosync_last: ctx = model.no_sync() if sync_now else nullcontext()
            with ctx:  # fault seqcls_zero_grad_inside: optimizer.zero_grad(set_to_none=True) || =
                logits = model(tokens)
                loss = F.cross_entropy(logits, labels) / args.accum_steps
                loss.backward()
            running += loss.detach()  # fault seqcls_sched_micro: = || scheduler.step()
            if not sync_now:
                continue

            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()  # fault seqcls_sched_micro: -
            optimizer.zero_grad(set_to_none=True)
            global_step += 1

            dist.all_reduce(running)  # fault seqcls_rank0_loss: -
            train_loss = running.item() / world_size  # fault seqcls_rank0_loss: train_loss = loss.item() * args.accum_steps
            running.zero_()
            if rank == 0:
                print(
                    f"epoch {epoch} update {global_step}/{total_updates} loss {train_loss:.4f} "
                    f"grad_norm {grad_norm:.3f} lr {optimizer.param_groups[0]['lr']:.2e}"
                )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
