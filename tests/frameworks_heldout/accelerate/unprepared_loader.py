"""Image classifier (small CNN) with accelerate; the data pipeline is built separately.

The DataLoader is created by a factory that is also used for evaluation, so only the model,
optimizer and scheduler go through accelerator.prepare.
"""

import gc

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(train=True, batch_size=16):
    g = torch.Generator().manual_seed(0 if train else 1)
    images = torch.randn(128, 1, 8, 8, generator=g)
    labels = torch.randint(0, 4, (128,), generator=g)
    return DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=train)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 4 * 4, 4)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def main():
    set_seed(1234)
    accelerator = Accelerator(cpu=True)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    train_loader = make_loader(train=True)

    criterion = nn.CrossEntropyLoss()
    for epoch in range(1):
        model.train()
        for i, (images, labels) in enumerate(train_loader):
            images, labels = images.to(accelerator.device), labels.to(accelerator.device)
            logits = model(images)
            loss = criterion(logits, labels)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            if i % 2 == 0:
                accelerator.print(f"epoch {epoch} it {i} loss {loss.item():.4f}")

    accelerator.end_training()
    del model, optimizer, scheduler
    gc.collect()


if __name__ == "__main__":
    main()
