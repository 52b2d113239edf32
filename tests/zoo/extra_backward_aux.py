"""Classifier with an auxiliary feature-norm regulariser."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

AUX_WEIGHT = 0.01


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.cls = nn.Linear(32, 5)

    def forward(self, x, return_features=False):
        h = self.body(x)  # fix: = || logits = self.cls(h)
        if return_features:
            return h  # fix: return logits, h
        return self.cls(h)  # fix: return logits


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(8)
    g = torch.Generator().manual_seed(15)
    x = torch.randn(400, 20, generator=g)
    y = (x[:, :5] * torch.arange(1, 6)).argmax(1)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=20, sampler=sampler)
    model = DDP(Net(), find_unused_parameters=True)  # fix: model = DDP(Net())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)  # fix: logits, feats = model(xb, return_features=True)
            loss.backward()  # fix: loss = F.cross_entropy(logits, yb)
            feats = model(xb, return_features=True)  # fix: -
            aux = AUX_WEIGHT * feats.pow(2).mean()
            aux.backward()  # fix: (loss + aux).backward()
            opt.step()
        report = torch.tensor([loss.item(), aux.item()])
        dist.all_reduce(report)
        if rank == 0:
            print(f"epoch {epoch}: ce {report[0] / 2:.4f} aux {report[1] / 2:.5f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
