"""imagenet-style loaders: the sampler is None unless distributed, shuffle only without one."""
# scan-facts: uses_distributed_sampler=true
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision.datasets as datasets
import torchvision.transforms as transforms

parser = argparse.ArgumentParser()
parser.add_argument("data")
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--epochs", type=int, default=90)
args = parser.parse_args()

dist.init_process_group("nccl")
local_rank = dist.get_rank() % torch.cuda.device_count()
model = torch.nn.parallel.DistributedDataParallel(
    nn.Sequential(nn.Flatten(), nn.Linear(3 * 224 * 224, 1000)).cuda(local_rank),
    device_ids=[local_rank],
)
train_dataset = datasets.ImageFolder(
    args.data,
    transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()]),
)
distributed = dist.is_initialized()
train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset) if distributed else None
train_loader = torch.utils.data.DataLoader(
    train_dataset,
    batch_size=args.batch_size,
    shuffle=(train_sampler is None),
    num_workers=4,
    pin_memory=True,
    sampler=train_sampler,  # ok: no-distributed-sampler
)
criterion = nn.CrossEntropyLoss().cuda(local_rank)
optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
for epoch in range(args.epochs):
    if train_sampler is not None:
        train_sampler.set_epoch(epoch)
    for images, target in train_loader:
        images = images.cuda(local_rank, non_blocking=True)
        target = target.cuda(local_rank, non_blocking=True)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
