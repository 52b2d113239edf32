"""Someone followed the advice 'give every rank a different seed' into the sampler."""
# scan-facts: uses_distributed_sampler=true sampler_seed_rank_dependent=true calls_set_epoch=false
# scan-facts: rank_seeds_identical=false
import os
import random

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet

BASE_SEED = 1234


def setup():
    dist.init_process_group("nccl")
    rank = int(os.environ["RANK"])
    seed = BASE_SEED + rank
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return rank, seed


def train():
    rank, seed = setup()
    model = DDP(ToyNet().cuda(), device_ids=[rank % torch.cuda.device_count()])
    ds = ToyDataset(2048)
    sampler = DistributedSampler(ds, shuffle=True, seed=seed)  # expect: sampler-seed-differs-per-rank
    dl = DataLoader(ds, batch_size=8, sampler=sampler)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for epoch in range(10):  # expect: sampler-set-epoch-missing
        for batch in dl:
            loss = model(batch["x"]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    train()
