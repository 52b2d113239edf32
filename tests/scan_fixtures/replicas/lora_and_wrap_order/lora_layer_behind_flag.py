"""LoRA layers come from the project's own class, but only when --lora_dim is set (default 0):
whether the run trains adapters is the command line's, not the code's."""
# scan-facts: uses_lora=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


class LinearLoRA(nn.Module):
    def __init__(self, base, dim):
        super().__init__()
        self.base = base
        self.down = nn.Linear(16, dim, bias=False)
        self.up = nn.Linear(dim, 16, bias=False)

    def forward(self, x):
        return self.base(x) + self.up(self.down(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lora_dim", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("nccl")
    model = ToyNet()
    if args.lora_dim > 0:
        model.body[0] = LinearLoRA(model.body[0], args.lora_dim)
    model = DDP(model.cuda())
    ds = ToyDataset(512)
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for batch in loader:
        loss = model(batch["x"]).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


main()
