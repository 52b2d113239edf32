"""ImageNet-example style: the architecture is chosen by name from the command line; the
default (a ViT) has no BatchNorm, but the run may pass --arch resnet50."""
# scan-facts: has_batchnorm=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision.models as models
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("-a", "--arch", default="vit_b_16", choices=sorted(models.list_models()))
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()

dist.init_process_group("nccl")
local_rank = dist.get_rank() % torch.cuda.device_count()
model = models.__dict__[args.arch]()
model = DDP(model.cuda(local_rank), device_ids=[local_rank])  # ok: batchnorm-without-syncbn
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
data = TensorDataset(torch.randn(256, 3, 224, 224), torch.randint(0, 1000, (256,)))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=32, sampler=sampler)
for epoch in range(90):
    sampler.set_epoch(epoch)
    for images, target in loader:
        loss = criterion(model(images.cuda()), target.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
