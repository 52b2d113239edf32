"""apex amp O2 (fp16 weights, fp32 master copies) with a static loss scale of 1: the backward
runs in fp16 unscaled, and small gradients flush to zero."""
# scan-facts: precision=fp16_amp uses_grad_scaler=false
import torch
import torch.distributed as dist
from apex import amp
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = ToyNet().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model, opt = amp.initialize(model, opt, opt_level="O2", loss_scale=1.0)
model = DDP(model)
for step in range(1000):
    x = torch.randn(16, 16, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    with amp.scale_loss(loss, opt) as scaled_loss:  # expect: fp16-without-grad-scaler
        scaled_loss.backward()
    opt.step()
