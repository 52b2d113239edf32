"""An image classifier whose model keeps a queue of example ids filled with -100 until used:
a -100 in a model's constructor is its state's sentinel, not labels masked in a batch, so the
fixed-size images are fixed-size examples."""
# scan-facts: variable_length_sequences=false
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class QueueNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 10)
        self.register_buffer("id_queue", torch.full((1, 256), -100))

    def forward(self, x):
        return self.body(x)


dist.init_process_group("nccl")
rank = dist.get_rank()
model = DDP(QueueNet().cuda(rank), device_ids=[rank])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(1024, 16), torch.randint(0, 10, (1024,)))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=32, sampler=sampler)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda(rank)), y.cuda(rank))
        opt.zero_grad()
        loss.backward()
        opt.step()
