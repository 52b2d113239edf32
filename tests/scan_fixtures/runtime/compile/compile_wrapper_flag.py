"""torch.compile reached through a training wrapper's own compile() (from a library the scan
does not read), behind an opt-in `--torchcompile`: not "torch.compile is not used"."""
# scan-facts: uses_torch_compile=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from timm.task import TrainTask

from _toy import ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--torchcompile", nargs="?", const="inductor", default=None)
args = parser.parse_args()

dist.init_process_group("nccl")
net = ToyNet().cuda()
task = TrainTask(net)
if args.torchcompile:
    task.compile(backend=args.torchcompile)  # compiles net in place
model = DDP(net)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
