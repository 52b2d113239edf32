"""An auxiliary penalty gets its own backward through the DDP model every few steps."""
# scan-facts: extra_backward_through_ddp=true forward_bypasses_ddp=false grad_accum_steps=1
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("gloo")
model = DDP(ToyNet())
ds = ToyDataset(256)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=8, sampler=sampler)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

for epoch in range(3):
    sampler.set_epoch(epoch)
    for step, batch in enumerate(loader):
        opt.zero_grad()
        out = model(batch["x"])
        loss = out.pow(2).mean()
        loss.backward()  # ok: extra-backward-through-ddp
        if step % 10 == 0:
            reg = model(batch["x"] * 0.1).abs().mean() * 1e-3
            reg.backward()  # expect: extra-backward-through-ddp
        opt.step()
