"""An apex-style prefetcher over (input, target) pairs: it primes the first pair in its
constructor and hands out pairs from next() until it returns None. The epoch loop sets the
epoch of the validation sampler, not of the training one."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class PairPrefetcher:
    def __init__(self, loader):
        self.loader = iter(loader)
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self):
        try:
            self.next_input, self.next_target = next(self.loader)
        except StopIteration:
            self.next_input = None
            self.next_target = None
            return
        with torch.cuda.stream(self.stream):
            self.next_input = self.next_input.cuda(non_blocking=True)
            self.next_target = self.next_target.cuda(non_blocking=True)

    def next(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        inp, target = self.next_input, self.next_target
        self.preload()
        return inp, target


def train(loader, model, criterion, optimizer):
    prefetcher = PairPrefetcher(loader)
    inp, target = prefetcher.next()
    while inp is not None:
        loss = criterion(model(inp), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        inp, target = prefetcher.next()


parser = argparse.ArgumentParser()
parser.add_argument("--distributed", action="store_true")
parser.add_argument("--epochs", type=int, default=90)
args = parser.parse_args()
if args.distributed:
    dist.init_process_group("nccl")
train_set = TensorDataset(torch.randn(4096, 32), torch.randint(0, 10, (4096,)))
val_set = TensorDataset(torch.randn(512, 32), torch.randint(0, 10, (512,)))
train_sampler = DistributedSampler(train_set) if args.distributed else None
val_sampler = DistributedSampler(val_set, shuffle=False) if args.distributed else None
train_loader = DataLoader(train_set, batch_size=64, sampler=train_sampler, shuffle=train_sampler is None)
val_loader = DataLoader(val_set, batch_size=64, sampler=val_sampler)
model = nn.Linear(32, 10).cuda()
if args.distributed:
    model = DDP(model)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for epoch in range(args.epochs):  # expect: sampler-set-epoch-missing
    if args.distributed:
        val_sampler.set_epoch(epoch)
    train(train_loader, model, criterion, optimizer)
