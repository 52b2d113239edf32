"""torch.set_default_dtype(torch.bfloat16): every parameter is created in bf16."""
# scan-facts: precision=pure_bf16
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

torch.set_default_dtype(torch.bfloat16)  # expect: pure-low-precision-weights
dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    loss = model(torch.randn(4, 16, device="cuda")).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
