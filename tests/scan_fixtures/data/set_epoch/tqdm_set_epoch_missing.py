"""The step loop is ``enumerate(tqdm(loader))`` with the bar shown on rank 0 only: still a loop
over the loader, inside an epoch loop that forgets set_epoch."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from tqdm import tqdm

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
rank = dist.get_rank()
ds = ToyDataset(2048)
loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds), num_workers=4)
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for epoch in range(20):  # expect: sampler-set-epoch-missing
    bar = tqdm(loader, disable=rank != 0, desc=f"epoch {epoch}")
    for step, batch in enumerate(bar):
        loss = model(batch["x"].cuda()).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        bar.set_postfix(loss=loss.item())
