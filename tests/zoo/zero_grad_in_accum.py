"""Sentiment-style classifier over fixed-length token windows, with accumulation."""

import argparse
import gc

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

p = argparse.ArgumentParser()
p.add_argument("--accum", type=int, default=4)
p.add_argument("--micro-batch", type=int, default=8)
p.add_argument("--epochs", type=int, default=2)
cfg = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(99)

gen = torch.Generator().manual_seed(4)
tokens = torch.randint(1, 300, (512, 24), generator=gen)
labels = ((tokens < 150).float().mean(1) > 0.5).long()
train_set = TensorDataset(tokens, labels)
sampler = DistributedSampler(train_set, shuffle=True)
loader = DataLoader(train_set, batch_size=cfg.micro_batch, sampler=sampler)


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(300, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.out = nn.Linear(32, 2)

    def forward(self, ids):
        _, h = self.rnn(self.emb(ids))
        return self.out(h[-1])


model = DDP(GRUClassifier())
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(cfg.epochs):
    sampler.set_epoch(epoch)
    model.train()
    for i, (ids, y) in enumerate(loader):
        optimizer.zero_grad()  # fix: -
        loss = loss_fn(model(ids), y) / cfg.accum
        loss.backward()
        if (i + 1) % cfg.accum == 0:
            optimizer.step()  # fix: = || optimizer.zero_grad()
    summary = torch.tensor([loss.item() * cfg.accum])
    dist.all_reduce(summary)
    if rank == 0:
        print(f"epoch {epoch} last loss {summary.item() / dist.get_world_size():.4f}")

del model
gc.collect()
dist.destroy_process_group()
