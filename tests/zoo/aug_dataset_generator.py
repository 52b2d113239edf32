"""Patch classifier on synthetic 8x8 images; the dataset owns its augmentation generator
(random horizontal flips and a small random crop offset per sample)."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

AUG_SEED = 2024


class Patches(Dataset):
    def __init__(self, n, aug_seed):
        g = torch.Generator().manual_seed(5)
        self.images = torch.randn(n, 1, 10, 10, generator=g)
        self.labels = (self.images[:, 0, :5].mean(dim=(1, 2)) > 0).long()
        self.rng = torch.Generator().manual_seed(aug_seed)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        if torch.rand((), generator=self.rng) < 0.5:
            img = img.flip(-1)
        dy, dx = torch.randint(0, 3, (2,), generator=self.rng).tolist()
        return img[:, dy : dy + 8, dx : dx + 8], self.labels[i]


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    ds = Patches(256, AUG_SEED)  # fix: ds = Patches(256, AUG_SEED + rank)
    sampler = DistributedSampler(ds, shuffle=True)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    model = DDP(nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            loss = F.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} done")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
