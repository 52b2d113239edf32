"""A reference run on one process first (unsharded on purpose, a plain model), then the DDP
job itself with a DistributedSampler: the DDP loop is the training the scan reports on."""
# scan-facts: uses_distributed_sampler=true grad_accum_steps=2
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("gloo")
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))


def reference_weights() -> nn.Module:
    net = nn.Linear(8, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    whole = DataLoader(data, batch_size=64, shuffle=True)  # ok: no-distributed-sampler
    for _ in range(3):
        for x, y in whole:
            opt.zero_grad()
            nn.functional.mse_loss(net(x), y).backward()
            opt.step()
    return net


reference = reference_weights()
model = DDP(nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y) / 2
        loss.backward()
        if i % 2 == 1:
            optimizer.step()
            optimizer.zero_grad()
