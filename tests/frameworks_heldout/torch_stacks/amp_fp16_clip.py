# Mixed precision (fp16 autocast + GradScaler) DDP regression with gradient clipping.
import gc
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

STEPS = int(os.getenv("STEPS", "8"))
CLIP = 1.0

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)

model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
model = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)

g = torch.Generator().manual_seed(1)
X = torch.randn(512, 16, generator=g)
Y = X[:, :1] * 3 - X[:, 1:2]
data = TensorDataset(X, Y)
sampler = DistributedSampler(data, shuffle=True)
loader = DataLoader(data, batch_size=16, sampler=sampler)

sampler.set_epoch(0)
for step, (xb, yb) in enumerate(loader):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        pred = model(xb)
        loss = nn.functional.mse_loss(pred.float(), yb)
    scaler.scale(loss).backward()
    nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    scaler.step(opt)
    scaler.update()
    if rank == 0:
        print(f"step {step} loss {loss.item():.4f} scale {scaler.get_scale():.0f}")
    if step + 1 >= STEPS:
        break

del model, opt
gc.collect()
dist.destroy_process_group()
