"""Transformer encoder regressor with no_sync accumulation and gradient clipping."""

import contextlib
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ACCUM = 4
MAX_NORM = 0.5


class SeqRegressor(nn.Module):
    def __init__(self, dim=24):
        super().__init__()
        self.proj = nn.Linear(4, dim)
        layer = nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=48, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        return self.head(self.encoder(self.proj(x)).mean(1)).squeeze(-1)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(5)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(384, 10, 4, generator=g)
    y = x[:, :, 0].cumsum(1)[:, -1] * 0.3
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    model = DDP(SeqRegressor())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mse = nn.MSELoss()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            last = (i + 1) % ACCUM == 0
            with contextlib.nullcontext() if last else model.no_sync():
                loss = mse(model(xb), yb) / ACCUM
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)  # fix: -
            if last:  # fix: = || >torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
                opt.step()
                opt.zero_grad()
        t = loss.detach() * ACCUM
        dist.all_reduce(t)
        if rank == 0:
            print(f"epoch {epoch} loss {t.item() / 2:.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
