"""The project's own distributed sampler (shards by rank, shuffles by seed + epoch through its
own set_epoch), built by a strategy object's helper; the trainer's epoch loop reseeds it through
the loader's sampler attribute every epoch."""
# scan-facts: calls_set_epoch=true uses_distributed_sampler=true
import math

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler

from _toy import ToyDataset, ToyNet


class ShardedSampler(Sampler[int]):
    def __init__(self, dataset, num_replicas, rank, seed=0):
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.seed = seed
        self.epoch = 0
        self.num_samples = math.ceil(len(dataset) / num_replicas)

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.dataset), generator=g).tolist()
        return iter(order[self.rank :: self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


class Strategy:
    def setup(self):
        dist.init_process_group("nccl")

    def setup_dataloader(self, dataset, batch_size):
        sampler = ShardedSampler(dataset, dist.get_world_size(), dist.get_rank())
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=2)

    def backward(self, loss, model, optimizer):
        loss.backward()

    def optimizer_step(self, optimizer, model):
        optimizer.step()
        optimizer.zero_grad()


class Trainer:
    def __init__(self, strategy, model, optimizer, loader, epochs):
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.train_dataloader = loader
        self.epochs = epochs

    def fit(self):
        for epoch in range(self.epochs):  # ok: sampler-set-epoch-missing
            self.train_dataloader.sampler.set_epoch(epoch)
            for batch in self.train_dataloader:
                loss = self.model(batch["x"].cuda()).square().mean()
                self.strategy.backward(loss, self.model, self.optimizer)
                self.strategy.optimizer_step(self.optimizer, self.model)


strategy = Strategy()
strategy.setup()
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = strategy.setup_dataloader(ToyDataset(4096), 16)
Trainer(strategy, model, opt, loader, epochs=3).fit()
