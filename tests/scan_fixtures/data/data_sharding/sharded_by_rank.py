"""No DistributedSampler, but the data is sliced by rank by hand; an IterableDataset stream."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

from _toy import ToyNet

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
full = torch.randn(1000, 16)
mine = full[rank::world]  # ok: no-distributed-sampler
loader = DataLoader(TensorDataset(mine), batch_size=10, shuffle=True)
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(3):
    for (x,) in loader:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
