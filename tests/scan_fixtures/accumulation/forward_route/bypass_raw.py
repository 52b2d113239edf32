"""Wrapped under a new name, trained under the old one."""
# scan-facts: forward_bypasses_ddp=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def main():
    dist.init_process_group("gloo")
    model = ToyNet()
    ddp_model = DDP(model)
    ds = ToyDataset(128)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    optimizer = torch.optim.Adam(ddp_model.parameters(), lr=1e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for batch in loader:
            out = model(batch["x"])  # expect: ddp-wrapper-bypassed
            loss = out.pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
