"""timm's accumulation shape: one helper does backward and, under ``if need_update:``, the
optimizer step; it is called inside no_sync() only when ``not need_update``. The step inside
that no_sync() can never run, so nothing steps on unsynchronised gradients."""
# scan-facts: uses_no_sync=true loss_divided_by_accum=true final_micro_step_synced=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
model = DDP(ToyNet())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
accum_steps = 4
for batch_idx in range(1000):
    need_update = (batch_idx + 1) % accum_steps == 0
    x = torch.randn(8, 16)

    def _backward(loss):
        loss.backward()
        if need_update:
            optimizer.step()

    if not need_update:
        with model.no_sync():
            pred = model(x)
            _backward(F.mse_loss(pred, torch.zeros_like(pred)) / accum_steps)
    else:
        pred = model(x)
        _backward(F.mse_loss(pred, torch.zeros_like(pred)) / accum_steps)
    if need_update:
        optimizer.zero_grad()
