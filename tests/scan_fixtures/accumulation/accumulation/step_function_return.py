"""The optimizer step lives in a per-batch function that returns early between windows."""
# scan-facts: grad_accum_steps=8 loss_divided_by_accum=true zero_grad_every_micro_step=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUM_STEPS = 8

dist.init_process_group("gloo")
model = DDP(nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2)))
optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
criterion = nn.CrossEntropyLoss()
dataset = TensorDataset(torch.randn(4096, 32), torch.randint(0, 2, (4096,)))
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=16, sampler=sampler)


def train_step(step, inputs, labels):
    loss = criterion(model(inputs), labels) / ACCUM_STEPS
    loss.backward()
    if (step + 1) % ACCUM_STEPS != 0:
        return loss.item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    optimizer.zero_grad()  # ok: zero-grad-inside-accumulation
    return loss.item()


for epoch in range(4):
    sampler.set_epoch(epoch)
    for step, (inputs, labels) in enumerate(loader):
        train_step(step, inputs, labels)
