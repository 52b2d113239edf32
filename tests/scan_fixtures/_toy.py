"""Helper module imported by fixtures (not a fixture itself)."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset


class ToyDataset(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 16)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i]}


class ToyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16))

    def forward(self, x):
        return self.body(x)


class ToyBNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.bn(self.conv(x)).mean((2, 3)))
