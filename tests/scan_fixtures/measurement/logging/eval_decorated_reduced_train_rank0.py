"""The evaluation helper runs under a ``@torch.no_grad()`` decorator and averages its loss over
the ranks; the training loss logged every step is rank 0's own. The reduced evaluation loss
says nothing about how the training loss is logged."""
# scan-facts: logs_rank0_only=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


@torch.no_grad()
def evaluate(model, loader, world_size):
    total = torch.zeros(1, device="cuda")
    for batch in loader:
        total += model(batch["x"].cuda()).square().mean()
    total = total / len(loader)
    dist.all_reduce(total)
    return (total / world_size).item()


def main():
    dist.init_process_group("nccl")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DDP(ToyNet().cuda())
    ds = ToyDataset(256)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, batch in enumerate(loader):
            loss = model(batch["x"].cuda()).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            if step % 50 == 0:
                eval_loss = evaluate(model, loader, world_size)
                if rank == 0:
                    print(f"eval loss {eval_loss:.4f}")
            if rank == 0:
                print(f"step {step} loss {loss.item():.4f}")  # expect: rank0-only-loss-logging


main()
