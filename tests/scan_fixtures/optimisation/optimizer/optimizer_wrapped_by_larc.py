"""SGD wrapped by apex's LARC (layer-wise adaptive rates): the update the step makes is the
wrapper's, which the scan does not read, so the family is not plain SGD."""
# scan-facts: optimizer_family=unknown
import torch
import torch.distributed as dist
from apex.parallel.LARC import LARC
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=4.8, momentum=0.9, weight_decay=1e-6)
optimizer = LARC(optimizer=optimizer, trust_coefficient=0.001, clip=False)
for step in range(1000):
    x = torch.randn(64, 16, device="cuda")
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
