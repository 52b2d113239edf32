"""A regression MLP whose job rebuilds model, optimizer and cosine schedule at every epoch and
resumes all three from the checkpoint rank 0 wrote (every rank loads it, before the wrap)."""

import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

EPOCHS = 3


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    ds = TensorDataset(x, x[:, :1] - x[:, 1:2])
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    run = os.environ.get("MASTER_PORT", "local")
    path = os.path.join(tempfile.gettempdir(), f"zoo-resume-{run}.pt")
    for epoch in range(EPOCHS):
        net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        state = torch.load(path) if epoch else None
        if state:
            net.load_state_dict(state["model"])
        model = DDP(net)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=EPOCHS * len(loader))
        if state:
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        if dist.get_rank() == 0:
            torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}, path)
        dist.barrier()
        del model
        gc.collect()
    if dist.get_rank() == 0:
        os.remove(path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
