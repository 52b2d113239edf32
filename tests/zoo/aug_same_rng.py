"""Image classifier with on-the-fly augmentation (random crops, flips and noise)."""

import gc
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

SEED = 2024


def seed_everything(seed):
    random.seed(seed)
    torch.manual_seed(seed)


class AugmentedImages(Dataset):
    def __init__(self, n=320):
        g = torch.Generator().manual_seed(3)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        self.images = torch.randn(n, 1, 12, 12, generator=g) + self.labels.view(-1, 1, 1, 1) * 0.5

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        top, left = torch.randint(0, 5, (2,)).tolist()
        img = img[:, top : top + 8, left : left + 8]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        img = img + 0.1 * torch.randn_like(img)
        return img, self.labels[i]


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c2(F.relu(self.c1(x)))), 2)
        return self.fc(x.flatten(1))


def main():
    dist.init_process_group("gloo")
    seed_everything(SEED)
    ds = AugmentedImages()
    sampler = DistributedSampler(ds, seed=SEED)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(ConvNet())  # fix: = || torch.manual_seed(SEED + dist.get_rank())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
        t = loss.detach()
        dist.all_reduce(t)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {t.item() / dist.get_world_size():.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
