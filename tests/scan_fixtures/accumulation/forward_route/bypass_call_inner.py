"""Hand loop that runs the forward as model.module(x): the all-reduce hooks never fire."""
# scan-facts: forward_bypasses_ddp=true
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("gloo")
rank = dist.get_rank()
net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
model = DDP(net)
ds = TensorDataset(torch.randn(1024, 16), torch.randn(1024, 1))
sampler = DistributedSampler(ds, shuffle=True)
loader = DataLoader(ds, batch_size=64, sampler=sampler)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.MSELoss()

for epoch in range(10):
    sampler.set_epoch(epoch)
    model.train()
    for xb, yb in loader:
        pred = model.module(xb)  # expect: ddp-wrapper-bypassed
        loss = loss_fn(pred, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if rank == 0:
        torch.save(model.module.state_dict(), f"ckpt_{epoch}.pt")
