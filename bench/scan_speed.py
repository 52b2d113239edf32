"""How long ``--script`` takes on big training scripts (2,000 and 10,000 generated lines).

Run: ``.venv/bin/python bench/scan_speed.py [--repeat N]``. Prints wall and CPU seconds per
scan; the bar is well under a second for 2,000 lines. The generated script is a realistic
mix: model classes, data helpers, config parsing and a DDP training loop with accumulation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HEADER = """\
import argparse
import contextlib
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

GRAD_ACCUM = 4
"""

BLOCK = '''

class Block{i}(nn.Module):
    """Residual MLP block number {i}."""

    def __init__(self, dim, hidden=None, dropout=0.1):
        super().__init__()
        hidden = hidden or 4 * dim
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = F.gelu(h)
        if self.training and h.shape[0] > 1:
            h = self.drop(h)
        return x + self.down(h)


def helper_{i}(values, scale=1.0, clip=None):
    """Data helper {i}: normalise, clip and bucket a list of numbers."""
    total = 0.0
    out = []
    for j, v in enumerate(values):
        v = v * scale
        if clip is not None and v > clip:
            v = clip
        elif v < -1e6:
            v = -1e6
        total += v
        if j % 7 == 0:
            out.append(math.sqrt(abs(v)) if v else 0.0)
        else:
            out.append(v / (j + 1))
    mean = total / max(1, len(values))
    return [x - mean for x in out], {{"mean": mean, "n": len(values), "id": {i}}}
'''

FOOTER = """

class TextDataset(Dataset):
    def __init__(self, n, dim):
        self.x = torch.randn(n, dim)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class Net(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList([Block0(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    stats = helper_0([1.0, 2.0, 3.0])
    model = DDP(Net(64, 4).cuda())
    ds = TextDataset(4096, 64)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, x in enumerate(loader):
            sync = (step + 1) % GRAD_ACCUM == 0
            with contextlib.nullcontext() if sync else model.no_sync():
                loss = model(x.cuda()).pow(2).mean() / GRAD_ACCUM
                loss.backward()
            if sync:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
            if rank == 0 and step % 100 == 0:
                print(f"step {{step}} loss {{loss.item()}} {{stats[1]}}")


if __name__ == "__main__":
    main()
"""


def generate(lines: int) -> str:
    """A syntactically valid training script of about ``lines`` lines."""
    parts = [HEADER]
    count = HEADER.count("\n") + FOOTER.count("\n")
    i = 0
    while count < lines:
        block = BLOCK.format(i=i)
        parts.append(block)
        count += block.count("\n")
        i += 1
    parts.append(FOOTER.format())
    return "".join(parts)


def measure(path: Path, repeat: int) -> tuple[float, float, int]:
    from ddpadvisor.scan import scan_file

    walls, cpus = [], []
    findings = 0
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = scan_file(path)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        findings = len(result.findings)
    return statistics.median(walls), statistics.median(cpus), findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for lines in (2_000, 10_000):
            path = Path(tmp) / f"train_{lines}.py"
            path.write_text(generate(lines))
            real = path.read_text().count("\n")
            wall, cpu, findings = measure(path, args.repeat)
            print(
                f"{real:>6} lines: {wall * 1000:7.1f} ms wall, {cpu * 1000:7.1f} ms CPU "
                f"(median of {args.repeat}), {findings} findings"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
