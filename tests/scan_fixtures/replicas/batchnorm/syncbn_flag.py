"""SyncBatchNorm behind a --sync-bn flag (torchvision reference style): the run's flags decide."""
# scan-facts: uses_syncbn=unknown has_batchnorm=true
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def get_args():
    p = argparse.ArgumentParser(description="ResNet training")
    p.add_argument("--sync-bn", dest="sync_bn", action="store_true", help="use SyncBatchNorm")
    p.add_argument("--epochs", default=90, type=int)
    p.add_argument("--lr", default=0.1, type=float)
    return p.parse_args()


def main(args):
    dist.init_process_group(backend="nccl")
    gpu = dist.get_rank() % torch.cuda.device_count()
    torch.cuda.set_device(gpu)
    model = torchvision.models.resnet50()
    model.cuda()
    if args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])  # ok: batchnorm-without-syncbn
    dataset = torchvision.datasets.FakeData(5000, transform=torchvision.transforms.ToTensor())
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=8, pin_memory=True)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for image, target in loader:
            image, target = image.cuda(non_blocking=True), target.cuda(non_blocking=True)
            loss = criterion(model(image), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main(get_args())
