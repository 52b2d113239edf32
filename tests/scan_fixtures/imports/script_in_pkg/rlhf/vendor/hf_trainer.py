"""A small trainer kept in the project (the shape of a vendored framework trainer)."""
import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class MiniTrainer:
    def __init__(self, model, lr):
        self.model = DistributedDataParallel(model.cuda())
        data = TensorDataset(torch.randn(256, 32), torch.randn(256, 32))
        self.sampler = DistributedSampler(data)
        self.loader = DataLoader(data, batch_size=8, sampler=self.sampler)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)

    def compute_loss(self, batch):
        raise NotImplementedError

    def log_loss(self, loss):
        pass

    def training_step(self, batch):
        loss = self.compute_loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.detach()

    def fit(self, epochs):
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)  # ok: sampler-set-epoch-missing
            for chosen, rejected in self.loader:
                loss = self.training_step({"chosen": chosen, "rejected": rejected})
                self.log_loss(loss)
