"""The weights are cast to bf16 when the GPU supports it and stay fp32 otherwise: the
machine the run lands on decides, so the scan must not call the run fp32."""
# scan-facts: precision=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
model = ToyNet()
model.to(dtype).to("cuda")  # ok: pure-low-precision-weights
model = DDP(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    x = torch.randn(16, 16, device="cuda", dtype=dtype)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
