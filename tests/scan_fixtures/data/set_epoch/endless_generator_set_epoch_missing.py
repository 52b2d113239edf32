"""Step-based training over an endless generator: each pass of its ``while True`` restarts the
loader, so that loop is the epoch loop, and it never sets the sampler's epoch."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def endless(loader):
    while True:  # expect: sampler-set-epoch-missing
        for batch in loader:
            yield batch


dist.init_process_group("nccl")
ds = ToyDataset(4096)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler, drop_last=True)
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = endless(loader)
for step in range(20_000):
    batch = next(batches)
    loss = model(batch["x"].cuda()).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
