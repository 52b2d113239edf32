"""The logged losses are copies all-reduced in place, one dict entry at a time, before rank 0
prints them: not a rank-local loss (the scan cannot follow which copy is printed, so it says
nothing rather than rank-0-only)."""
# scan-facts: logs_rank0_only=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def main():
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    model = DDP(ToyNet().cuda())
    ds = ToyDataset(256)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, batch in enumerate(loader):
            out = model(batch["x"])
            losses = {"mse": out.square().mean(), "l1": out.abs().mean()}
            loss = losses["mse"] + losses["l1"]
            loss.backward()
            opt.step()
            opt.zero_grad()
            shown = {k: v.detach().clone() for k, v in losses.items()}
            for v in shown.values():
                dist.all_reduce(v)
                v /= world
            if dist.get_rank() == 0 and step % 50 == 0:
                print(" ".join(f"{k} loss {v.item():.4f}" for k, v in shown.items()))  # ok: rank0-only-loss-logging


main()
