"""Sequences of different lengths padded by hand in the collate function, and a loss averaged
over the valid frames only (``sum(err * mask) / sum(mask)``): each rank divides by its own
count of frames, which varies from batch to batch."""
# scan-facts: variable_length_sequences=true
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Utterances(Dataset):
    def __init__(self, n):
        self.items = [torch.randn(8, 20 + (i * 7) % 60) for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    longest = max(x.size(1) for x in batch)
    frames = torch.zeros(len(batch), 8, longest)
    lengths = torch.zeros(len(batch), dtype=torch.long)
    for i, x in enumerate(batch):
        frames[i, :, : x.size(1)] = x
        lengths[i] = x.size(1)
    return frames, lengths


def masked_error(pred, target, mask):
    err = ((pred - target) ** 2).mean(1)
    err = torch.sum(err * mask)
    return err / torch.sum(mask)


dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(nn.Conv1d(8, 8, 3, padding=1).cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = Utterances(256)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=8, sampler=sampler, collate_fn=collate)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for frames, lengths in loader:
        frames = frames.cuda()
        mask = (torch.arange(frames.size(2), device="cuda")[None] < lengths.cuda()[:, None]).float()
        loss = masked_error(model(frames), frames, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
