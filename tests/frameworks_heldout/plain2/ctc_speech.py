"""CTC acoustic model (conv subsampling + BiGRU) on synthetic filterbank-like frames.

Each utterance is a random phone sequence rendered as a few noisy frames per phone; the model
learns frame -> phone alignments with CTC. Two micro-batches per optimizer update.
"""

import argparse
import gc
import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, DistributedSampler

BLANK = 0


class SyntheticSpeech(Dataset):
    def __init__(self, n_utts, n_phones=12, n_mels=20, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.prototypes = torch.randn(n_phones + 1, n_mels, generator=g)
        self.utts = []
        for _ in range(n_utts):
            length = int(torch.randint(3, 9, (1,), generator=g))
            phones = torch.randint(1, n_phones + 1, (length,), generator=g)
            frames = []
            for p in phones.tolist():
                dur = int(torch.randint(3, 7, (1,), generator=g))
                frames.append(self.prototypes[p].expand(dur, n_mels))
            feats = torch.cat(frames) + 0.4 * torch.randn(sum(f.shape[0] for f in frames), n_mels, generator=g)
            self.utts.append((feats, phones))

    def __len__(self):
        return len(self.utts)

    def __getitem__(self, i):
        return self.utts[i]


def collate(batch):
    feats, labels = zip(*batch)
    feat_lens = torch.tensor([f.shape[0] for f in feats])
    label_lens = torch.tensor([lab.shape[0] for lab in labels])
    return pad_sequence(feats, batch_first=True), feat_lens, torch.cat(labels), label_lens


class AcousticModel(nn.Module):
    def __init__(self, n_mels=20, hidden=48, n_phones=12):
        super().__init__()
        self.subsample = nn.Sequential(
            nn.Conv1d(n_mels, hidden, kernel_size=3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv1d(hidden, hidden, kernel_size=3, padding=1),
            nn.GELU(),
        )
        self.rnn = nn.GRU(hidden, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden, n_phones + 1)

    def forward(self, feats, feat_lens):
        x = self.subsample(feats.transpose(1, 2)).transpose(1, 2)
        out_lens = (feat_lens + 1) // 2
        packed = nn.utils.rnn.pack_padded_sequence(x, out_lens, batch_first=True, enforce_sorted=False)
        x, _ = self.rnn(packed)
        x, _ = nn.utils.rnn.pad_packed_sequence(x, batch_first=True)
        return self.proj(x).log_softmax(-1), out_lens


def greedy_decode(log_probs, lens):
    hyps = []
    for lp, n in zip(log_probs, lens):
        best = lp[:n].argmax(-1).tolist()
        hyp, prev = [], BLANK
        for t in best:
            if t != prev and t != BLANK:
                hyp.append(t)
            prev = t
        hyps.append(hyp)
    return hyps


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
            prev, d[j] = d[j], cur
    return d[-1]


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--accum-steps", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup-updates", type=int, default=3)
    ap.add_argument("--clip", type=float, default=0.5)
    return ap.parse_args()


def main():
    args = parse()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    train = SyntheticSpeech(128, seed=0)
    dev = SyntheticSpeech(32, seed=1)
    sampler = DistributedSampler(train, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, collate_fn=collate, drop_last=True)
    dev_loader = DataLoader(dev, batch_size=16, sampler=DistributedSampler(dev, shuffle=False), collate_fn=collate)

    model = DDP(AcousticModel())
    ctc = nn.CTCLoss(blank=BLANK, zero_infinity=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    updates_per_epoch = len(loader) // args.accum_steps
    total = args.epochs * updates_per_epoch
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.2, total_iters=args.warmup_updates)
    decay = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total - args.warmup_updates)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, decay], milestones=[args.warmup_updates])

    update = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        t0 = time.time()
        window_loss = 0.0
        for i, (feats, feat_lens, labels, label_lens) in enumerate(loader):
            last_micro = (i + 1) % args.accum_steps == 0
            with nullcontext() if last_micro else model.no_sync():  # fault ctc_sync_first_micro: with model.no_sync() if i % args.accum_steps else nullcontext():
                log_probs, out_lens = model(feats, feat_lens)
                loss = ctc(log_probs.transpose(0, 1), labels, out_lens, label_lens)
                (loss / args.accum_steps).backward()  # fault ctc_accum_unscaled: loss.backward()  # fault ctc_clip_every_micro: = || torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            window_loss += loss.item() / args.accum_steps
            if not last_micro:
                continue
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)  # fault ctc_clip_every_micro: -
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            update += 1
            stats = torch.tensor([window_loss])
            dist.all_reduce(stats)
            if rank == 0:
                print(
                    f"ep {epoch} upd {update}/{total} ctc {stats.item() / world:.3f} "
                    f"gnorm {grad_norm:.2f} lr {scheduler.get_last_lr()[0]:.2e}"  # fault ctc_clip_every_micro: f"lr {scheduler.get_last_lr()[0]:.2e}"
                )
            window_loss = 0.0

        model.eval()
        errs = torch.zeros(2)
        with torch.no_grad():
            for feats, feat_lens, labels, label_lens in dev_loader:
                log_probs, out_lens = model(feats, feat_lens)
                refs = labels.split(label_lens.tolist())
                for hyp, ref in zip(greedy_decode(log_probs, out_lens), refs):
                    errs += torch.tensor([edit_distance(hyp, ref.tolist()), len(ref)])
        dist.all_reduce(errs)
        if rank == 0:
            per = errs[0] / errs[1]
            print(f"epoch {epoch}: dev PER {per:.3f} ({time.time() - t0:.1f}s)")

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
