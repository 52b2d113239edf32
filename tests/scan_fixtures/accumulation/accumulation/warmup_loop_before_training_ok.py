"""A compile warm-up nest (its state thrown away afterwards) runs before the training nest of
the same depth: the training loop, with its loss divided by the micro-step count, is the one
the scan reports on."""
# scan-facts: loss_divided_by_accum=true uses_no_sync=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
initial = {k: v.clone() for k, v in model.state_dict().items()}

for shape in (8, 16):
    for step in range(4):
        model(torch.randn(shape, 16, device="cuda")).pow(2).mean().backward()  # ok: grad-accum-loss-not-scaled
        if step % 2 == 1:
            opt.step()
            model.zero_grad(set_to_none=True)
model.load_state_dict(initial)

micro_steps = 4
for step in range(1000):
    for idx in range(micro_steps):
        loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
        (loss / micro_steps).backward()
    opt.step()
    model.zero_grad(set_to_none=True)
