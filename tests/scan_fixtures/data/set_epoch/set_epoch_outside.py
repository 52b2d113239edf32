"""set_epoch is there, but only once before training starts."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true sampler_seed_rank_dependent=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def run(epochs=3):
    dist.init_process_group("gloo")
    ds = ToyDataset(512)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    model = DDP(ToyNet())
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    sampler.set_epoch(0)  # expect: sampler-set-epoch-missing
    for epoch in range(epochs):
        for batch in loader:
            out = model(batch["x"])
            loss = out.square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()


run()
