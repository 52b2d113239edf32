"""A timm scheduler with its warmup written out: decided, 2000 steps."""
# scan-facts: warmup_steps=2000
import torch
import torch.distributed as dist
import torch.nn.functional as F
from timm.scheduler.cosine_lr import CosineLRScheduler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = CosineLRScheduler(  # ok: warmup-too-short
    optimizer, t_initial=100000, warmup_t=2000, warmup_lr_init=1e-6, t_in_epochs=False
)
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
step = 0
for epoch in range(10):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        scheduler.step_update(step)
