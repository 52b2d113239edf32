"""Helper module imported by fixtures (not a fixture itself): a logging wrapper that yields the
batches it is given, and a CUDA-style prefetcher, the way vision repositories write them."""
import time

import torch


class RunningMeter:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.total += value * n
        self.count += n


class MetricLogger:
    def __init__(self, delimiter="  "):
        self.meters = {}
        self.delimiter = delimiter

    def update(self, **kwargs):
        for name, value in kwargs.items():
            self.meters.setdefault(name, RunningMeter()).update(float(value))

    def log_every(self, iterable, print_freq, header=""):
        started = time.time()
        for i, item in enumerate(iterable):
            yield item
            if i % print_freq == 0:
                print(f"{header} [{i}/{len(iterable)}] {time.time() - started:.1f}s")


class CudaPrefetcher:
    def __init__(self, loader, device):
        self.device = device
        self.batches = iter(loader)
        self.stream = torch.cuda.Stream() if torch.cuda.is_available() else None
        self.load_next()

    def load_next(self):
        try:
            self.pending = next(self.batches)
        except StopIteration:
            self.pending = None

    def next(self):
        batch = self.pending
        if batch is not None:
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        self.load_next()
        return batch
