"""Only the evaluation loss (computed under no_grad) is printed, on rank 0: not a training-loss
log, so nothing is said about how the training loss is logged."""
# scan-facts: logs_rank0_only=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def evaluate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for batch in loader:
            total += model(batch["x"]).square().mean().item()
    return total / len(loader)


def main():
    dist.init_process_group("nccl")
    model = DDP(ToyNet().cuda())
    ds = ToyDataset(256)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        model.train()
        for batch in loader:
            loss = model(batch["x"]).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        val_loss = evaluate(model, loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} val loss {val_loss:.4f}")  # ok: rank0-only-loss-logging


main()
