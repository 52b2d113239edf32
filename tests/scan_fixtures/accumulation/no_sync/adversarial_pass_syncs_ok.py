"""Adversarial training (FGM): the clean pass runs under no_sync, the pass on perturbed embeddings after it syncs, and its all-reduce carries the gradients the first backward left: the step uses synced gradients."""
# scan-facts: final_micro_step_synced=true uses_no_sync=true
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
        with model.no_sync():
            loss = F.mse_loss(model(x), x)
            loss.backward()
        perturb(model, 0.1)
        loss_adv = F.mse_loss(model(x), x)
        loss_adv.backward()
        opt.step()
        opt.zero_grad()
