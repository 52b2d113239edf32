"""A dataset that returns whole utterances as they are, and a model whose training forward
cuts a random window out of each one (a helper draws the start with torch.rand): the data is
randomised after all, inside the model, so "no random augmentation" is not stated."""
# scan-facts: uses_random_augmentation=unknown
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Clips(Dataset):
    def __init__(self, n):
        self.wave = torch.randn(n, 1, 4096)

    def __len__(self):
        return len(self.wave)

    def __getitem__(self, i):
        return self.wave[i]


def random_windows(x, width):
    starts = (torch.rand(x.size(0)) * (x.size(-1) - width)).long()
    return torch.stack([x[i, :, s : s + width] for i, s in enumerate(starts.tolist())])


class Decoder(nn.Module):
    def __init__(self, width=512):
        super().__init__()
        self.width = width
        self.conv = nn.Conv1d(1, 1, 9, padding=4)

    def forward(self, x):
        return self.conv(random_windows(x, self.width))


dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(Decoder().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = Clips(256)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=8, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for wave in loader:
        loss = model(wave.cuda()).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
