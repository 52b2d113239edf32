"""Fine-tunes a small classifier head in bfloat16 to halve its memory."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(9)
    x = torch.randn(256, 32, generator=g)
    y = (x[:, :3].sum(1) > 0).long()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 2))
    net = net.to(torch.bfloat16)  # fix: -
    model = DDP(net)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            logits = model(xb.to(torch.bfloat16))  # fix: with torch.autocast("cpu", dtype=torch.bfloat16): || >logits = model(xb)
            loss = F.cross_entropy(logits.float(), yb)
            loss.backward()
            opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {mean.item() / dist.get_world_size():.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
