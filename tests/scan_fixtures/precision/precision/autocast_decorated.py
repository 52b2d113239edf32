"""Mixed precision hidden in a decorator on forward, and a bf16 default dtype elsewhere."""
# scan-facts: precision=fp16_amp uses_grad_scaler=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @torch.autocast(device_type="cuda", dtype=torch.float16)  # expect: fp16-without-grad-scaler
    def forward(self, x):
        return self.fc(x)


dist.init_process_group("nccl")
model = DDP(Net().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    loss = model(torch.randn(4, 16, device="cuda")).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
