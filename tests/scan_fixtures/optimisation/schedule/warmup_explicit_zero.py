"""The lookalike that is decided: no warmup, written as a literal 0 with no flag to change it."""
# scan-facts: warmup_steps=0
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from transformers import get_cosine_schedule_with_warmup

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
scheduler = get_cosine_schedule_with_warmup(  # expect: warmup-too-short
    optimizer, num_warmup_steps=0, num_training_steps=10 * len(loader)
)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
