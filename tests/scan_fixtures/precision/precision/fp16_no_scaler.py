"""fp16 autocast without a GradScaler: small gradients flush to zero."""
# scan-facts: precision=fp16_amp uses_grad_scaler=false uses_grad_clipping=true unscale_before_clip=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    x = torch.randn(16, 16, device="cuda")
    with torch.cuda.amp.autocast():  # expect: fp16-without-grad-scaler
        loss = model(x).float().pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()  # expect: fp16-without-grad-scaler
    opt.zero_grad()
