"""A rank-conditional forward: rank 0 goes through ``model.module`` (to log its activations),
the other ranks through the wrapper. Both sides run in the job, on different ranks, so rank 0's
gradients never join the all-reduce."""
# scan-facts: forward_bypasses_ddp=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
rank = dist.get_rank()
model = DDP(ToyNet().cuda())
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda()
        if rank == 0:
            out = model.module(x)  # expect: ddp-wrapper-bypassed
            print(out.norm().item())
        else:
            out = model(x)
        loss = out.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
