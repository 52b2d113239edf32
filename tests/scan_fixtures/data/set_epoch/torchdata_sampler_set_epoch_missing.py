"""torchdata's resumable StatefulDistributedSampler (a DistributedSampler subclass) under a
recipe class; the epoch loop forgets set_epoch, so every epoch replays the first order."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

from _toy import ToyDataset, ToyNet


class Recipe:
    def setup(self):
        dist.init_process_group("nccl")
        self.model = ToyNet().cuda()
        fully_shard(self.model)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=2e-5)
        ds = ToyDataset(8192)
        sampler = StatefulDistributedSampler(
            ds, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=True, seed=0
        )
        self.loader = StatefulDataLoader(ds, batch_size=8, sampler=sampler)

    def train(self, epochs):
        for epoch in range(epochs):  # expect: sampler-set-epoch-missing
            for batch in self.loader:
                loss = self.model(batch["x"].cuda()).square().mean()
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()


recipe = Recipe()
recipe.setup()
recipe.train(3)
