"""pytorch/examples-imagenet-flavoured loop: train() per epoch, AverageMeter, StepLR per epoch.

Small conv net on random 3x16x16 images, several short epochs.
"""

import argparse
import gc
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.utils.data
import torch.utils.data.distributed


class AverageMeter:
    def __init__(self, name):
        self.name = name
        self.sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def build_model(num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(16 * 16, num_classes),
    )


def train(train_loader, model, criterion, optimizer, epoch, args):
    losses = AverageMeter("Loss")
    model.train()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        losses.update(loss.item(), images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % args.print_freq == 0 and args.rank == 0:
            print(f"Epoch: [{epoch}][{i}/{len(train_loader)}]\tLoss {losses.avg:.4f}")


def main():
    parser = argparse.ArgumentParser(description="toy imagenet")
    parser.add_argument("--epochs", default=3, type=int)
    parser.add_argument("-b", "--batch-size", default=16, type=int)
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
    parser.add_argument("-p", "--print-freq", default=2, type=int)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo", init_method="env://")
    args.rank = dist.get_rank()
    args.world_size = int(os.environ["WORLD_SIZE"])

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(build_model(10))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(
        model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    g = torch.Generator().manual_seed(6)
    train_dataset = torch.utils.data.TensorDataset(
        torch.randn(96, 3, 16, 16, generator=g), torch.randint(0, 10, (96,), generator=g)
    )
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
    train_loader = torch.utils.data.DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=(train_sampler is None),
        sampler=train_sampler,
    )

    for epoch in range(args.epochs):
        train(train_loader, model, criterion, optimizer, epoch, args)
        scheduler.step()

    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
