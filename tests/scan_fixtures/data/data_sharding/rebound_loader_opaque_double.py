"""accelerate-example style: the loader helper is swapped for a test double under an env
switch. The double comes from code the scan does not have, so the real helper still decides
how the data is sharded."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=true per_gpu_batch_size=32
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def get_dataloaders(batch_size=32):
    ds = ToyDataset(512)
    sampler = DistributedSampler(ds)
    return DataLoader(ds, batch_size=batch_size, sampler=sampler), sampler  # ok: no-distributed-sampler


if os.environ.get("TESTING_MOCKED_DATALOADERS", None) == "1":
    from myproject.testing import mocked_dataloaders

    get_dataloaders = mocked_dataloaders  # noqa: F811


def training_function(epochs=3):
    dist.init_process_group("gloo")
    model = DDP(ToyNet())
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    loader, sampler = get_dataloaders(32)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            loss = model(batch["x"]).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()


if __name__ == "__main__":
    training_function()
