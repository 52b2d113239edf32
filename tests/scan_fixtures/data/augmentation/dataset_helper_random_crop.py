"""A dataset whose __getitem__ hands each clip to a method of its own, which calls a module
function that picks a random crop with numpy: random augmentation, two calls below the
dataset method."""
# scan-facts: uses_random_augmentation=true
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyNet


def crop_at_random(frames, size):
    top = np.random.randint(0, frames.shape[-1] - size + 1)
    return frames[..., top : top + size]


class Clips(Dataset):
    def __init__(self, n):
        self.frames = torch.randn(n, 40)

    def __len__(self):
        return len(self.frames)

    def _augment(self, clip):
        return crop_at_random(clip, 16)

    def __getitem__(self, i):
        return self._augment(self.frames[i])


dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = Clips(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for clip in loader:
        loss = model(clip.cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
