"""The same islice window with the no_sync test the wrong way round: the last of the `accum` micro-batches runs under no_sync, so the step uses unsynced gradients."""
# scan-facts: uses_no_sync=true final_micro_step_synced=false grad_accum_steps=2
import contextlib
import itertools

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("gloo")
data = ToyDataset(1024)
sampler = DistributedSampler(data)
micro_bs, accum, epochs = 4, 2, 3
loader = DataLoader(data, batch_size=micro_bs, sampler=sampler, drop_last=True)
updates = len(loader) // accum
model = DDP(ToyNet())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    batches = iter(loader)
    for _ in range(updates):
        for micro, batch in enumerate(itertools.islice(batches, accum)):
            last = micro == accum - 1
            ctx = model.no_sync() if last else contextlib.nullcontext()
            with ctx:
                x = batch["x"]
                loss = F.mse_loss(model(x), x)
                (loss / accum).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
