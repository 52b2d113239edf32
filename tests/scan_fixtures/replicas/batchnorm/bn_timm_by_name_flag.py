"""timm's create_model with the name from the command line: the default, resnet50, has
BatchNorm, but that is the default's, not necessarily the run's."""
# scan-facts: has_batchnorm=unknown
import argparse

import timm
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="resnet50", type=str)
parser.add_argument("--num-classes", type=int, default=100)
args = parser.parse_args()

dist.init_process_group("nccl")
model = timm.create_model(args.model, pretrained=False, num_classes=args.num_classes)
model = DDP(model.cuda())  # ok: batchnorm-without-syncbn
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = TensorDataset(torch.randn(256, 3, 224, 224), torch.randint(0, 100, (256,)))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=32, sampler=sampler)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
