"""apex amp set up only when the run's hyperparameters say fp16_run: the default is fp32, the
documented launch turns it on, so neither the precision nor the loss scaling is decided."""
# scan-facts: precision=unknown uses_grad_scaler=unknown
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--fp16_run", action="store_true")
args = parser.parse_args()
dist.init_process_group("nccl")
model = ToyNet().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
if args.fp16_run:
    from apex import amp

    model, opt = amp.initialize(model, opt, opt_level="O2")
model = DDP(model)
for step in range(1000):
    x = torch.randn(16, 16, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    if args.fp16_run:
        with amp.scale_loss(loss, opt) as scaled_loss:
            scaled_loss.backward()
    else:
        loss.backward()
    opt.step()
