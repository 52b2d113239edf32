"""The project's own generator moves each batch to the GPU (``yield`` from a loop over the
loader); the training loop iterates the generator."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def on_device(loader, device):
    for batch in loader:
        yield {k: v.to(device, non_blocking=True) for k, v in batch.items()}


dist.init_process_group("nccl")
ds = ToyDataset(4096)
loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(10):  # expect: sampler-set-epoch-missing
    for batch in on_device(loader, "cuda"):
        for micro in batch["x"].chunk(2):
            loss = model(micro).square().mean()
            loss.backward()
        opt.step()
        opt.zero_grad()
