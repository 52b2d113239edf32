"""Small CNN classifier on synthetic 8x8 images."""

import gc
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_dataset(n=384, classes=10, seed=7):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    prototypes = torch.randn(classes, 1, 8, 8, generator=g)
    images = prototypes[labels] + 0.5 * torch.randn(n, 1, 8, 8, generator=g)
    return TensorDataset(images, labels)


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def train(epochs=4, batch_size=32, lr=0.05):
    rank = dist.get_rank()
    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    model = DistributedDataParallel(SmallCNN())
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):  # fix: = || >sampler.set_epoch(epoch)
        correct = torch.zeros(2)
        for images, labels in loader:
            logits = model(images)
            loss = loss_fn(logits, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            correct += torch.tensor([(logits.argmax(1) == labels).sum().item(), len(labels)])
        dist.all_reduce(correct)
        if rank == 0:
            print(f"epoch {epoch} acc {correct[0] / correct[1]:.3f}")
    return model


def main():
    dist.init_process_group(backend="gloo")
    torch.manual_seed(int(os.environ.get("SEED", "0")))
    model = train()
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
