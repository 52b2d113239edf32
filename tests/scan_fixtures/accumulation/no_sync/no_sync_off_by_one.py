"""no_sync on every micro-step except the FIRST: the optimizer steps on local gradients."""
# scan-facts: grad_accum_steps=4 uses_no_sync=true final_micro_step_synced=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

accumulation_steps = 4

dist.init_process_group("gloo")
model = DDP(ToyNet())
ds = ToyDataset(256)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=4, sampler=sampler)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

for epoch in range(2):
    sampler.set_epoch(epoch)
    for step, batch in enumerate(loader):
        if step % accumulation_steps != 0:
            with model.no_sync():  # expect: no-sync-misaligned
                loss = model(batch["x"]).mean() / accumulation_steps
                loss.backward()
        else:
            loss = model(batch["x"]).mean() / accumulation_steps
            loss.backward()
        if (step + 1) % accumulation_steps == 0:
            opt.step()
            opt.zero_grad()
