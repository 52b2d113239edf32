"""A frozen encoder is cast to fp16 to save memory; the model that trains stays in fp32
and runs under bf16 autocast. The helper's dtype is not the training precision."""
# scan-facts: precision=bf16_amp uses_grad_scaler=false
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
encoder = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.SiLU()).cuda()
encoder.requires_grad_(False)
encoder.to(dtype=torch.float16)
denoiser = nn.Conv2d(4, 4, 3, padding=1).cuda()
optimizer = torch.optim.AdamW(denoiser.parameters(), lr=1e-4)
denoiser = DDP(denoiser)
for step in range(1000):
    images = torch.randn(8, 3, 32, 32, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        latents = encoder(images).float()
    noise = torch.randn_like(latents)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        pred = denoiser(latents + noise)
    loss = F.mse_loss(pred.float(), noise)  # ok: fp16-without-grad-scaler
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
