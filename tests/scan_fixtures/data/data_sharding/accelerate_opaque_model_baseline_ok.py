"""An accelerate job whose model class comes from a package the scan cannot read, after a
single-process baseline on the same data: accelerate's backward marks the distributed loop."""
# scan-facts: uses_distributed_sampler=true
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from mypackage.models import Regressor

data = TensorDataset(torch.randn(128, 4), torch.randn(128, 1))


def make_loader(batch: int) -> DataLoader:
    return DataLoader(data, batch_size=batch, shuffle=True)  # ok: no-distributed-sampler


baseline = Regressor()
base_opt = torch.optim.SGD(baseline.parameters(), lr=0.1)
for x, y in make_loader(32):
    base_opt.zero_grad()
    torch.nn.functional.mse_loss(baseline(x), y).backward()
    base_opt.step()

accelerator = Accelerator()
model = Regressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_dl, model, optimizer = accelerator.prepare(make_loader(16), model, optimizer)
for x, y in train_dl:
    optimizer.zero_grad()
    accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
    optimizer.step()
