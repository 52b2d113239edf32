"""The same adversarial step with no_sync around the second pass instead: the last backward before the step never all-reduces, so each rank steps on its own gradients."""
# scan-facts: final_micro_step_synced=false uses_no_sync=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


@torch.no_grad()
def perturb(model, eps):
    for p in model.parameters():
        if p.grad is not None:
            p.add_(eps * p.grad / (p.grad.norm() + 1e-8))


dist.init_process_group("gloo")
data = ToyDataset(1024)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"]
        loss = F.mse_loss(model(x), x)
        loss.backward()
        perturb(model, 0.1)
        with model.no_sync():
            loss_adv = F.mse_loss(model(x), x)
            loss_adv.backward()
        opt.step()
        opt.zero_grad()
