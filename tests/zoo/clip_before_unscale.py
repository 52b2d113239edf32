"""AMP training with loss scaling and gradient clipping."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class MLP(nn.Module):
    def __init__(self, d=32, h=96, out=4):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, h)
        self.fc3 = nn.Linear(h, out)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(77)
    g = torch.Generator().manual_seed(18)
    x = torch.randn(384, 32, generator=g)
    y = (x[:, :4] + 0.2 * torch.randn(384, 4, generator=g)).argmax(1)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(MLP())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(xb).float(), yb)
            scaler.scale(loss).backward()  # fix: = || scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(optimizer)
            scaler.update()
        out = loss.detach()
        dist.all_reduce(out)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {out.item() / 2:.4f} scale {scaler.get_scale():.0f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
