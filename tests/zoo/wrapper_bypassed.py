"""Lightning-style module whose training_step holds the loss logic."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class LitRegressor(nn.Module):
    def __init__(self, d_in=12, hidden=48):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):  # fix: def forward(self, x, y=None):
        return self.net(x)  # fix: out = self.net(x) || if y is None: || >return out || return F.mse_loss(out, y)

    def training_step(self, batch):  # fix: -
        x, y = batch  # fix: -
        return F.mse_loss(self(x), y)  # fix: -

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=2e-3)


def fit(model, loader, sampler, epochs):
    optimizer = model.module.configure_optimizers()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        epoch_loss = torch.zeros(())
        for batch in loader:
            optimizer.zero_grad()
            loss = model.module.training_step(batch)  # fix: loss = model(*batch)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.detach()
        dist.all_reduce(epoch_loss)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {epoch_loss.item() / len(loader) / dist.get_world_size():.4f}")


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(17)
    g = torch.Generator().manual_seed(21)
    x = torch.randn(400, 12, generator=g)
    y = (x[:, :3] ** 2).sum(1, keepdim=True) - x[:, 3:4]
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=20, sampler=sampler)
    model = DDP(LitRegressor())
    fit(model, loader, sampler, epochs=3)
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
