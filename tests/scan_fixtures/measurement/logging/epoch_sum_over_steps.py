"""The epoch's loss is summed over the ranks and divided by this rank's number of batches only:
the printed epoch loss is W times the mean."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
rank = dist.get_rank()
data = ToyDataset(1024)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = DDP(ToyNet().cuda())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    total = torch.zeros((), device="cuda")
    for batch in loader:
        x = batch["x"].cuda()
        loss = F.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.detach().float()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    epoch_loss = total / len(loader)
    if rank == 0:
        print(f"epoch {epoch} train loss {epoch_loss:.4f}")  # expect: metric-reduction-wrong
