"""The per-sample errors are summed and divided by the batch size read off the prediction:
a mean over the batch, written by hand."""
# scan-facts: loss_reduction=mean
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
model = DDP(ToyNet())
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(100):
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    pred = model(x)
    loss = (pred - y).pow(2).sum() / pred.shape[0]
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
