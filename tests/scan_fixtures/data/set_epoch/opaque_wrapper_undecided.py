"""The loader goes through a wrapper from a package the scan does not have; whether the loop
over its result reads the loader's batches is not known, so set_epoch is not decided."""
# scan-facts: calls_set_epoch=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from fastloaders import device_prefetch
from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
ds = ToyDataset(4096)
loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(10):  # ok: sampler-set-epoch-missing
    for batch in device_prefetch(loader, depth=2):
        loss = model(batch["x"]).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
