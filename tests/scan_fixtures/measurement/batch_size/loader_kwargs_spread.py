"""The DataLoader's arguments come from a dict filled item by item: its batch size is not the
default 1 just because the scan did not see batch_size= at the call."""
# scan-facts: per_gpu_batch_size=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def loader_kwargs(ds, batch_size):
    kwargs = {}
    kwargs["sampler"] = DistributedSampler(ds)
    kwargs["batch_size"] = batch_size
    kwargs["drop_last"] = True
    return kwargs


def main():
    dist.init_process_group("nccl")
    model = DDP(ToyNet().cuda())
    ds = ToyDataset(256)
    loader = DataLoader(ds, num_workers=2, **loader_kwargs(ds, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for batch in loader:
        loss = model(batch["x"]).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


main()
