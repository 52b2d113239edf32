"""Character-level LSTM language model on variable-length lines, packed sequences.

The summed token loss of an update is divided by the target characters of the whole global
batch (every micro-batch of the window, every rank), so long and short lines weigh alike.

torchrun --nproc_per_node 2 charlm_packed.py --epochs 3
"""

import argparse
import gc
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset, DistributedSampler

PAD = 0
VOCAB = 30  # 0 = pad, 1 = start of line, 2..29 = characters


class MarkovLines(Dataset):
    """Lines of 4 to 80 characters from a fixed random Markov chain (the same on every rank)."""

    def __init__(self, n, seed, chain_seed=0):
        g = torch.Generator().manual_seed(chain_seed)
        chain = torch.softmax(3.0 * torch.randn(VOCAB - 2, VOCAB - 2, generator=g), dim=1)
        g.manual_seed(seed)
        self.lines = []
        for _ in range(n):
            length = int(torch.randint(4, 81, (1,), generator=g))
            chars = [int(torch.randint(0, VOCAB - 2, (1,), generator=g))]
            for _ in range(length - 1):
                chars.append(int(torch.multinomial(chain[chars[-1]], 1, generator=g)))
            self.lines.append(torch.tensor([1] + [c + 2 for c in chars]))

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        return self.lines[i]


def collate(lines):
    lengths = torch.tensor([len(t) - 1 for t in lines])
    inputs = pad_sequence([t[:-1] for t in lines], batch_first=True, padding_value=PAD)
    targets = pad_sequence([t[1:] for t in lines], batch_first=True, padding_value=PAD)
    return inputs, targets, lengths


class CharLSTM(nn.Module):
    def __init__(self, emb=32, hidden=64, layers=2, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, emb, padding_idx=PAD)
        self.rnn = nn.LSTM(emb, hidden, layers, batch_first=True, dropout=dropout)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, VOCAB)

    def forward(self, inputs, lengths):
        packed = pack_padded_sequence(
            self.embed(inputs), lengths, batch_first=True, enforce_sorted=False
        )
        hidden, _ = self.rnn(packed)
        hidden, _ = pad_packed_sequence(hidden, batch_first=True, total_length=inputs.shape[1])
        return self.out(self.drop(hidden))


class Trainer:
    def __init__(self, model, optimizer, scheduler, accum, clip, log_every):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.accum = accum
        self.clip = clip
        self.log_every = log_every
        self.world = dist.get_world_size()
        self.rank = dist.get_rank()
        self.updates = 0

    def _loss_denominator(self, window):
        """Target characters of the global batch, over the world size: DDP averages the
        ranks' gradients, so each rank's summed loss over this gives the global token mean."""
        n = torch.tensor(float(sum(int(lengths.sum()) for _, _, lengths in window)))
        dist.all_reduce(n)  # fmt: skip  # fault lm_rank_tokens: -
        return n / self.world  # fmt: skip  # fault lm_rank_tokens: return n

    def _forward(self, inputs, lengths):
        return self.model(inputs, lengths)  # fmt: skip  # fault lm_module_forward: return self.model.module(inputs, lengths)

    def train_step(self, window):
        denom = self._loss_denominator(window)
        loss_sum, tokens = 0.0, 0
        for j, (inputs, targets, lengths) in enumerate(window):
            sync = j == len(window) - 1
            with nullcontext() if sync else self.model.no_sync():
                logits = self._forward(inputs, lengths)
                summed = F.cross_entropy(
                    logits.reshape(-1, VOCAB),
                    targets.reshape(-1),
                    ignore_index=PAD,
                    reduction="sum",
                )
                (summed / denom).backward()  # fmt: skip  # fault lm_micro_token_mean: (F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=PAD) / len(window)).backward()
            loss_sum += summed.item()
            tokens += int(lengths.sum())
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.updates += 1
        return loss_sum, tokens, float(grad_norm)

    def train_epoch(self, loader, epoch):
        self.model.train()
        window, stats = [], torch.zeros(2)
        for batch in loader:
            window.append(batch)
            if len(window) < self.accum:
                continue
            loss_sum, tokens, grad_norm = self.train_step(window)
            window = []
            stats += torch.tensor([loss_sum, float(tokens)])
            if self.updates % self.log_every == 0:
                dist.all_reduce(stats)  # fmt: skip  # fault lm_rank0_log: -
                if self.rank == 0:
                    print(
                        f"epoch {epoch} update {self.updates} loss/char {stats[0] / stats[1]:.4f} "
                        f"lr {self.scheduler.get_last_lr()[0]:.2e} grad_norm {grad_norm:.3f}",
                        flush=True,
                    )
                stats.zero_()
        self.scheduler.step()

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        stats = torch.zeros(2)
        for inputs, targets, lengths in loader:
            logits = self.model.module(inputs, lengths)
            loss = F.cross_entropy(
                logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=PAD, reduction="sum"
            )
            stats += torch.tensor([loss.item(), float(lengths.sum())])
        dist.all_reduce(stats)
        self.model.train()
        return (stats[0] / stats[1]).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(1234)

    train_set, val_set = MarkovLines(256, seed=5), MarkovLines(64, seed=6)
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, sampler=sampler, collate_fn=collate
    )
    val_loader = DataLoader(
        val_set,
        batch_size=16,
        sampler=DistributedSampler(val_set, shuffle=False),
        collate_fn=collate,
    )

    model = DDP(CharLSTM())
    torch.manual_seed(1234 + 1000 * rank)  # per-rank dropout masks from here on
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.6)
    trainer = Trainer(model, optimizer, scheduler, args.accum, clip=0.5, log_every=4)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        trainer.train_epoch(train_loader, epoch)
        val = trainer.evaluate(val_loader)
        if rank == 0:
            print(f"epoch {epoch} val loss/char {val:.4f}", flush=True)

    del trainer, model, optimizer, scheduler
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
