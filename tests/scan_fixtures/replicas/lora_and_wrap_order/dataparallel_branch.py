"""imagenet-style setup: DDP when distributed, DataParallel on the features otherwise."""
# scan-facts: module_created_after_wrap=false
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision.models as models
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--arch", default="resnet18")
parser.add_argument("--gpu", type=int, default=None)
args = parser.parse_args()
dist.init_process_group("nccl")
args.distributed = dist.get_world_size() > 1
model = models.__dict__[args.arch]()

if args.distributed:
    torch.cuda.set_device(args.gpu)
    model.cuda(args.gpu)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
elif torch.cuda.is_available():
    if args.arch.startswith("alexnet") or args.arch.startswith("vgg"):
        model.features = torch.nn.DataParallel(model.features)  # ok: params-added-after-ddp-wrap
        model.cuda()
    else:
        model = torch.nn.DataParallel(model).cuda()

ds = TensorDataset(torch.randn(256, 3, 224, 224), torch.randint(0, 1000, (256,)))
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for epoch in range(90):
    sampler.set_epoch(epoch)
    for images, target in loader:
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
