"""ResNet-ish CNN with BatchNorm on synthetic 3-channel images."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class TinyResNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layer = ResBlock(8)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.layer(self.stem(x)), 1).flatten(1))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(31)
    g = torch.Generator().manual_seed(9)
    labels = torch.randint(0, 4, (256,), generator=g)
    images = torch.randn(256, 3, 8, 8, generator=g) + labels.view(-1, 1, 1, 1).float() * 0.4
    train_ds = TensorDataset(images, labels)
    sampler = DistributedSampler(train_ds)
    loader = DataLoader(train_ds, batch_size=16, sampler=sampler)

    model = DDP(TinyResNet(), broadcast_buffers=False)  # fix: model = DDP(TinyResNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3 * len(loader))
    for epoch in range(3):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        model.eval()
        with torch.no_grad():
            acc = (model(images[:64]).argmax(1) == labels[:64]).float().mean()
        dist.all_reduce(acc)
        if rank == 0:
            print(f"epoch {epoch}: eval acc {acc.item() / dist.get_world_size():.3f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
