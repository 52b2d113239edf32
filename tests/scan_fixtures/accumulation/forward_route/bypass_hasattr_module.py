"""``model.module if hasattr(model, "module") else model`` picks the inner model whenever the
model is wrapped, which it always is under DDP: training through it bypasses the wrapper. The
same pick for saving the weights is fine."""
# scan-facts: forward_bypasses_ddp=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        net = model.module if hasattr(model, "module") else model
        loss = net(batch["x"].cuda()).square().mean()  # expect: ddp-wrapper-bypassed
        opt.zero_grad()
        loss.backward()
        opt.step()
    raw = model.module if hasattr(model, "module") else model
    if dist.get_rank() == 0:
        torch.save(raw.state_dict(), f"ckpt_{epoch}.pt")
