"""Two-stage classifier (encoder, then head) on synthetic features; the loop keeps the encoder's
features to log their norm."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(EncoderHead())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        norm = 0.0
        for xb, yb in loader:
            feats = model.module.encoder(xb)  # fix: feats = None
            logits = model.module.head(feats)  # fix: logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            norm = feats.norm().item() if feats is not None else norm
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
