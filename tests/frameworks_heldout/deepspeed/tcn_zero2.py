"""Multivariate forecasting with a small dilated temporal conv net on a DeepSpeed engine, ZeRO
stage 2. The optimizer (torch AdamW) and a warmup-then-cosine LambdaLR are the script's own and
handed to deepspeed.initialize, which steps the scheduler at each optimizer step; the config is
built from the command line (micro batch, accumulation, clipping). Windows of a synthetic
noisy multi-sine series, the script's own loader with a DistributedSampler.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 tcn_zero2.py --epochs 2
"""

import argparse
import math

import deepspeed
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class SineWindows(Dataset):
    """Windows of `context` steps of a 4-channel noisy multi-sine series; the target is the next
    step of every channel."""

    def __init__(self, n=512, context=32, channels=4):
        g = torch.Generator().manual_seed(3)
        t = torch.arange(n + context + 1, dtype=torch.float32)
        freqs = torch.rand(channels, generator=g) * 0.3 + 0.05
        phase = torch.rand(channels, generator=g) * 6.28
        series = torch.sin(t[None, :] * freqs[:, None] + phase[:, None])
        self.series = series + 0.05 * torch.randn(series.shape, generator=g)
        self.n, self.context = n, context

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        window = self.series[:, i : i + self.context]
        return window, self.series[:, i + self.context]


class TemporalBlock(nn.Module):
    def __init__(self, channels, dilation):
        super().__init__()
        self.pad = 2 * dilation
        self.conv1 = nn.Conv1d(channels, channels, 3, dilation=dilation)
        self.conv2 = nn.Conv1d(channels, channels, 3, dilation=dilation)

    def forward(self, x):
        y = F.gelu(self.conv1(F.pad(x, (self.pad, 0))))
        y = self.conv2(F.pad(y, (self.pad, 0)))
        return F.gelu(x + y)


class TCN(nn.Module):
    def __init__(self, in_channels=4, hidden=32, levels=3):
        super().__init__()
        self.inp = nn.Conv1d(in_channels, hidden, 1)
        self.blocks = nn.Sequential(*[TemporalBlock(hidden, 2**i) for i in range(levels)])
        self.head = nn.Linear(hidden, in_channels)

    def forward(self, x):
        h = self.blocks(self.inp(x))
        return self.head(h[:, :, -1])


def warmup_cosine(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--micro_batch", type=int, default=16)
    parser.add_argument("--grad_accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--warmup_steps", type=int, default=3)
    args = parser.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    world = dist.get_world_size()
    torch.manual_seed(0)

    dataset = SineWindows()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.micro_batch, sampler=sampler, drop_last=True)
    total_steps = args.epochs * len(loader) // args.grad_accum

    model = TCN()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(args.warmup_steps, total_steps))
    config = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.grad_accum,
        "gradient_clipping": args.max_grad_norm,  # fault tcn_zero2_torch_clip: "gradient_clipping": 0.0,  # clipped in the loop instead
        "zero_optimization": {"stage": 2, "contiguous_gradients": True, "overlap_comm": False},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10_000,
    }
    engine, optimizer, _, scheduler = deepspeed.initialize(
        model=model, optimizer=optimizer, lr_scheduler=scheduler, config=config
    )

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        window_loss = torch.zeros(1)
        for step, (x, y) in enumerate(loader):
            loss = F.mse_loss(engine(x), y)
            engine.backward(loss)  # fault tcn_zero2_torch_clip: = || torch.nn.utils.clip_grad_norm_(engine.module.parameters(), args.max_grad_norm)
            engine.step()  # fault tcn_zero2_sched_per_micro: = || scheduler.step()
            window_loss += loss.detach() / args.grad_accum
            if (step + 1) % args.grad_accum == 0:
                dist.all_reduce(window_loss)
                if engine.global_rank == 0:
                    print(
                        f"epoch {epoch} step {engine.global_steps}: loss {window_loss.item() / world:.4f} "
                        f"lr {scheduler.get_last_lr()[0]:.2e}"
                    )
                window_loss.zero_()


if __name__ == "__main__":
    main()
