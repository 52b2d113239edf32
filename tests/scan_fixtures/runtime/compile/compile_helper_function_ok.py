"""torch.compile on a helper function (a decorator): the model itself is not compiled."""
# scan-facts: uses_torch_compile=false
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


@torch.compile(dynamic=True)
def smooth_l1(pred, target):
    return F.smooth_l1_loss(pred, target)


def main():
    dist.init_process_group("nccl")
    model = DDP(ToyNet().cuda())
    ds = ToyDataset(256)
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for batch in loader:
            loss = smooth_l1(model(batch["x"]), batch["x"])
            loss.backward()
            opt.step()
            opt.zero_grad()


main()
