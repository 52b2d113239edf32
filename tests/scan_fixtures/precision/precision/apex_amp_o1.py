"""apex amp at opt_level O1 (fp16 casts around fp32 weights) with its dynamic loss scaling
through amp.scale_loss: mixed precision with a loss scaler, as apex documents it."""
# scan-facts: precision=fp16_amp uses_grad_scaler=true
import apex
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = ToyNet().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
model, opt = apex.amp.initialize(model, opt, opt_level="O1")
model = DDP(model)
for step in range(1000):
    x = torch.randn(16, 16, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    with apex.amp.scale_loss(loss, opt) as scaled_loss:  # ok: fp16-without-grad-scaler
        scaled_loss.backward()
    opt.step()
