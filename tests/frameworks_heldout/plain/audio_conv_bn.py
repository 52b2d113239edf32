"""1-D conv net (BatchNorm1d) classifying the dominant frequency of noisy synthetic waveforms.

SGD + Nesterov, MultiStepLR, gradient accumulation (every micro-batch all-reduced), validation
on rank 0 with the running BatchNorm statistics.

    torchrun --standalone --nproc_per_node 2 audio_conv_bn.py
"""

import argparse
import gc
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FREQS = (2.0, 5.0, 9.0, 14.0)
N_CLASSES = len(FREQS)
SIGNAL_LEN = 128


def waveforms(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, len(FREQS), (n,), generator=g)
    t = torch.linspace(0, 1, SIGNAL_LEN)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    freq = torch.tensor(FREQS)[labels].unsqueeze(1)
    x = torch.sin(2 * math.pi * freq * t + phase) + 0.8 * torch.randn(n, SIGNAL_LEN, generator=g)
    return TensorDataset(x.unsqueeze(1), labels)


class AudioNet(nn.Module):
    def __init__(self, n_classes=N_CLASSES):
        super().__init__()
        layers = []
        ch_in = 1
        for ch_out in (16, 32, 32):
            layers += [
                nn.Conv1d(ch_in, ch_out, 7, padding=3),
                nn.BatchNorm1d(ch_out),
                nn.ReLU(),
                nn.MaxPool1d(2),
            ]
            ch_in = ch_out
        self.body = nn.Sequential(*layers)
        self.classifier = nn.Linear(ch_in, n_classes)

    def forward(self, x):
        return self.classifier(self.body(x).mean(-1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--accum-steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)

    train_ds, val_ds = waveforms(512, seed=0), waveforms(128, seed=1)
    sampler = DistributedSampler(train_ds, shuffle=True, drop_last=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler)
    val_dl = DataLoader(val_ds, batch_size=64)

    model = DDP(AudioNet())  # fault audio_no_broadcast: model = DDP(AudioNet(), broadcast_buffers=False)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4
    )
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[5], gamma=0.3)

    updates = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        epoch_loss, n_micro = 0.0, 0
        for i, (x, y) in enumerate(train_dl):
            loss = F.cross_entropy(model(x), y)
            (loss / args.accum_steps).backward()  # fault audio_accum_unscaled: loss.backward()
            epoch_loss += loss.item()
            n_micro += 1
            if (i + 1) % args.accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
                updates += 1

        summary = torch.tensor([epoch_loss, float(n_micro)])
        dist.all_reduce(summary)
        if rank == 0:
            model.eval()
            correct = 0
            with torch.no_grad():
                for x, y in val_dl:
                    correct += (model.module(x).argmax(1) == y).sum().item()
            print(
                f"epoch {epoch}: updates {updates} train_loss {summary[0] / summary[1]:.4f} "
                f"val_acc {correct / len(val_ds):.3f} lr {scheduler.get_last_lr()[0]:.4f}"
            )
        dist.barrier()

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
