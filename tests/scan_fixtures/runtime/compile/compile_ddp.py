"""torch.compile over the DDP-wrapped model, bf16 autocast, warmup via LambdaLR."""
# scan-facts: uses_torch_compile=true precision=bf16_amp warmup_steps=10 uses_grad_clipping=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

WARMUP = 10

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
model = torch.compile(model)  # expect: torch-compile-ddp-interaction
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999))  # expect: adam-eps-beta2-unstable
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP))  # expect: warmup-too-short
for step in range(10_000):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(torch.randn(32, 16, device="cuda")).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad()
