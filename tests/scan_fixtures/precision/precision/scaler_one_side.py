"""The GradScaler exists only when the compute dtype detected at run time is fp16: whether
the run scales its loss depends on the hardware, not on the code."""
# scan-facts: uses_grad_scaler=unknown
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet
from mytrainer.common import COMPUTE_DTYPE

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
scaler = torch.amp.GradScaler() if COMPUTE_DTYPE == torch.float16 else None  # ok: fp16-without-grad-scaler
for step in range(1000):
    x = torch.randn(8, 16, device="cuda")
    with torch.autocast("cuda", dtype=COMPUTE_DTYPE):
        loss = F.mse_loss(model(x), x)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
