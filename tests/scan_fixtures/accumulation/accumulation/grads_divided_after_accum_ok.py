"""The loss is not divided; the accumulated gradients are, once, before the step
(p.grad /= steps): the same update as dividing each micro-step's loss."""
# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true uses_no_sync=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizers = [torch.optim.AdamW(model.parameters(), lr=3e-4)]
accumulation_steps = 4
for step in range(100):
    for i in range(1, accumulation_steps + 1):
        loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
        if i < accumulation_steps:
            with model.no_sync():
                loss.backward()  # ok: grad-accum-loss-not-scaled
        else:
            loss.backward()
    for p in model.parameters():
        p.grad /= accumulation_steps
    for opt in optimizers:
        opt.step()
    model.zero_grad(set_to_none=True)
