"""A helper builds the optimizer its name argument picks, and the script hands it a
command-line choice (SGD by default): the family is the run's option, not the first
branch's Adam, so neither the family nor Adam's beta2 is decided."""
# scan-facts: optimizer_family=unknown adam_beta2=unknown
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def build_optimizer(model, name="Adam", lr=1e-3, momentum=0.9):
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "Adam":
        opt = torch.optim.Adam(params, lr=lr, betas=(momentum, 0.999))  # ok: adam-eps-beta2-unstable
    elif name == "AdamW":
        opt = torch.optim.AdamW(params, lr=lr, betas=(momentum, 0.999))
    elif name == "SGD":
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True)
    else:
        raise ValueError(name)
    return opt


parser = argparse.ArgumentParser()
parser.add_argument("--optimizer", default="SGD", choices=["SGD", "Adam", "AdamW"])
parser.add_argument("--lr", type=float, default=0.01)
args = parser.parse_args()

dist.init_process_group("gloo")
model = DDP(ToyNet())
optimizer = build_optimizer(model, args.optimizer, args.lr)
for step in range(100):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
