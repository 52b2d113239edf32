"""Training through model.module: DDP never sees the forward, so nothing is all-reduced."""
# scan-facts: forward_bypasses_ddp=true extra_backward_through_ddp=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 64), nn.ReLU())
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        return self.head(self.backbone(x))

    def compute_loss(self, x, y):
        return nn.functional.cross_entropy(self(x), y)


dist.init_process_group("gloo")
net = Classifier()
model = DDP(net)
data = TensorDataset(torch.randn(512, 20), torch.randint(0, 4, (512,)))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.05)

for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = model.module.compute_loss(x, y)  # expect: ddp-wrapper-bypassed
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model.module(x).argmax(-1) == y).float().mean()  # ok: ddp-wrapper-bypassed
