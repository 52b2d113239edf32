"""A project optimizer over torch's Optimizer takes a clipping keyword and clips inside its own
``step``, which ``scaler.step(opt)`` runs where the walk does not follow: the gradients are
clipped, not "no clipping before scaler.step"."""

# scan-facts: uses_grad_clipping=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


class ClippedAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, clipping_scale=None):
        super().__init__(params, dict(lr=lr))
        self.clipping_scale = clipping_scale

    @torch.no_grad()
    def step(self, closure=None):
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        if self.clipping_scale is not None:
            factor = min(1.0, float(self.clipping_scale / (norm + 1e-6)))
            for g in grads:
                g.mul_(factor)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])


dist.init_process_group("nccl")
rank = dist.get_rank()
model = DDP(ToyNet().cuda(rank), device_ids=[rank])
opt = ClippedAdam(model.parameters(), lr=1e-3, clipping_scale=2.0)
scaler = torch.amp.GradScaler("cuda")
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(4):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda(rank)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = F.mse_loss(model(x), x)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
