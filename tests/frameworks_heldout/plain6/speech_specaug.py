"""Keyword classifier on synthetic log-mel spectrograms with SpecAugment masking.

A 1-D conv net over time (mel bins as channels), fp16 autocast with a GradScaler, OneCycleLR
stepped every batch, clipping after unscaling. Each rank sees 4 utterances per step, so the
conv blocks use GroupNorm rather than BatchNorm (SyncBatchNorm needs GPUs).

torchrun --nproc_per_node 2 speech_specaug.py
"""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

N_MELS, FRAMES, KEYWORDS = 20, 48, 6


def synth_keywords(n, seed):
    """Keyword k is a formant sweeping from bin 2+k to bin 8+2k, shifted in time, with noise."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, KEYWORDS, (n,), generator=g)
    spec = torch.randn(n, N_MELS, FRAMES, generator=g) * 0.6
    mel = torch.arange(N_MELS).float().view(N_MELS, 1)
    for i in range(n):
        k = int(labels[i])
        start = int(torch.randint(0, 16, (1,), generator=g))
        t = torch.arange(32).float()
        centre = 2 + k + (6 + k) * t / 31
        band = torch.exp(-0.5 * (mel - centre.view(1, -1)) ** 2)
        spec[i, :, start : start + 32] += 2.5 * band
    return TensorDataset(spec, labels)


def spec_augment(spec, gen, freq_width=4, time_width=6, time_masks=2):
    """SpecAugment-style masking: one frequency band and a few time spans per utterance."""
    spec = spec.clone()
    n, mels, frames = spec.shape
    for i in range(n):
        f = int(torch.randint(0, freq_width + 1, (1,), generator=gen))
        f0 = int(torch.randint(0, mels - f + 1, (1,), generator=gen))
        spec[i, f0 : f0 + f, :] = 0.0
        for _ in range(time_masks):
            w = int(torch.randint(0, time_width + 1, (1,), generator=gen))
            t0 = int(torch.randint(0, frames - w + 1, (1,), generator=gen))
            spec[i, :, t0 : t0 + w] = 0.0
    return spec


def norm(channels):
    return nn.GroupNorm(4, channels)  # fmt: skip  # fault spk_batchnorm: return nn.BatchNorm1d(channels)


class ConvKWS(nn.Module):
    def __init__(self, width=48, dropout=0.1):
        super().__init__()
        layers, c_in = [], N_MELS
        for dilation in (1, 2, 4):
            layers += [
                nn.Conv1d(c_in, width, 3, padding=dilation, dilation=dilation),
                norm(width),
                nn.ReLU(),
                nn.Dropout(dropout),
            ]
            c_in = width
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, KEYWORDS)

    def forward(self, spec):
        return self.classifier(self.features(spec).mean(dim=2))


@torch.no_grad()
def validate(model, loader):
    model.eval()
    correct = torch.zeros(2)
    for spec, label in loader:
        with torch.autocast("cpu", dtype=torch.float16):
            logits = model(spec)
        correct += torch.tensor([(logits.argmax(1) == label).sum().item(), label.numel()])
    dist.all_reduce(correct)
    model.train()
    return (correct[0] / correct[1]).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4, help="utterances per rank")
    parser.add_argument("--max-lr", type=float, default=4e-3)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    train_set, val_set = synth_keywords(192, seed=11), synth_keywords(64, seed=12)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)  # fmt: skip  # fault spk_sampler_rank_seed: train_sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed + rank)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    val_loader = DataLoader(
        val_set, batch_size=16, sampler=DistributedSampler(val_set, shuffle=False)
    )

    model = DDP(ConvKWS())
    # the weights came from the shared seed (and DDP broadcast rank 0's); dropout masks should not
    torch.manual_seed(args.seed * 1000 + rank)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.max_lr, weight_decay=0.01)
    steps_per_epoch = len(train_loader)  # fmt: skip  # fault spk_onecycle_dataset: steps_per_epoch = len(train_set) // args.batch_size
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=args.max_lr,
        epochs=args.epochs,
        steps_per_epoch=steps_per_epoch,
        pct_start=0.25,
    )
    scaler = torch.amp.GradScaler("cpu")
    aug_gen = torch.Generator().manual_seed(args.seed * 100 + rank)

    step = 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)  # fmt: skip  # fault spk_no_set_epoch: -
        seen = torch.zeros(2)
        for spec, label in train_loader:
            spec = spec_augment(spec, aug_gen)
            with torch.autocast("cpu", dtype=torch.float16):
                logits = model(spec)
                loss = F.cross_entropy(logits, label)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # fmt: skip  # fault spk_clip_scaled: -
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            seen += torch.tensor([loss.item(), 1.0])
            if step % 12 == 0:
                dist.all_reduce(seen)
                if rank == 0:
                    print(
                        f"step {step} loss {seen[0] / seen[1]:.4f} lr {scheduler.get_last_lr()[0]:.2e} "
                        f"grad_norm {grad_norm:.3f} scale {scaler.get_scale():.0f}",
                        flush=True,
                    )
                seen.zero_()
        acc = validate(model, val_loader)
        if rank == 0:
            print(f"epoch {epoch} val_acc {acc:.3f}", flush=True)

    del model, optimizer, scheduler, scaler
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
