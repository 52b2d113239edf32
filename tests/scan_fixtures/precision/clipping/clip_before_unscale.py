"""GradScaler with clipping on the still-scaled gradients."""
# scan-facts: uses_grad_scaler=true unscale_before_clip=false precision=fp16_amp uses_grad_clipping=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")
for step in range(1000):
    x = torch.randn(16, 16, device="cuda")
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = model(x).pow(2).mean()
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # expect: clip-before-unscale
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
