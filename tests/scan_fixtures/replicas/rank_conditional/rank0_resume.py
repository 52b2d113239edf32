"""Resuming from a checkpoint on rank 0 only, after wrapping."""
# scan-facts: rank_conditional_state_change=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def main(resume="ckpt.pt"):
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    model = ToyNet().cuda()
    if rank == 0:
        model.load_state_dict(torch.load("pretrained.pt"))  # ok: checkpoint-loaded-on-rank0-only
    model = DDP(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if resume and dist.get_rank() == 0:
        state = torch.load(resume, map_location="cuda")
        model.module.load_state_dict(state["model"])  # expect: checkpoint-loaded-on-rank0-only
        optimizer.load_state_dict(state["optim"])  # expect: checkpoint-loaded-on-rank0-only
    for step in range(100):
        loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0 and step % 50 == 0:
            torch.save({"model": model.module.state_dict(), "optim": optimizer.state_dict()}, resume)  # ok: checkpoint-loaded-on-rank0-only


if __name__ == "__main__":
    main()
