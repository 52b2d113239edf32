"""The divided micro-losses summed over an epoch and divided by its optimizer steps
(len(loader) / ACCUM): the mean loss per step, not a value still divided by the count."""

# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true logged_loss_reduction_wrong=unknown
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyNet

ACCUM = 4

dist.init_process_group("gloo")
data = TensorDataset(torch.randn(512, 16))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=8, sampler=sampler)
model = DDP(ToyNet())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for epoch in range(3):
    sampler.set_epoch(epoch)
    epoch_loss = 0.0
    for i, (x,) in enumerate(loader):
        pred = model(x)
        loss = F.mse_loss(pred, torch.zeros_like(pred)) / ACCUM
        loss.backward()
        epoch_loss += loss.item()
        if (i + 1) % ACCUM == 0:
            opt.step()
            opt.zero_grad()
    if dist.get_rank() == 0:
        print(f"epoch {epoch} loss {epoch_loss / (len(loader) / ACCUM):.4f}")  # ok: metric-reduction-wrong
