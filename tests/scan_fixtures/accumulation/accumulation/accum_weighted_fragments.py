"""A batch split into fragments whose losses are weighted by their share of the batch (the
MLPerf SSD reference's form): a product with a ratio is the accumulation scaling, and which
ratio it is cannot be told, so the scaling is left undecided rather than called missing."""

# scan-facts: loss_divided_by_accum=unknown zero_grad_every_micro_step=false
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
model = DDP(ToyNet())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
fragment_size = 4
for step in range(1000):
    batch = torch.randn(16, 16)
    for fragment in torch.split(batch, fragment_size):
        pred = model(fragment)
        loss = F.mse_loss(pred, torch.zeros_like(pred))
        loss = loss * (fragment.shape[0] / batch.shape[0])
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
