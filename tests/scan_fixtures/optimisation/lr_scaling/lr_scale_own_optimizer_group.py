"""The project's own optimizer (a LARS-style class over ``torch.optim.Optimizer``) gets its rate
each step through ``optimizer.param_groups[0]["lr"]``, from a base multiplied by the number of
processes: linear scaling with the world size."""
# scan-facts: lr_scaling=linear warmup_steps=1000
import torch
import torch.distributed as dist
from torch import optim
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


class TrustRatioSGD(optim.Optimizer):
    def __init__(self, params, lr, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                ratio = p.norm() / (p.grad.norm() + 1e-8)
                p.add_(p.grad, alpha=-group["lr"] * float(ratio))


def set_rate(opt, step, world):
    base = 0.2 * world
    opt.param_groups[0]["lr"] = base * min(1.0, step / 1000)  # expect: lr-scaled-too-aggressively


dist.init_process_group("nccl")
world = dist.get_world_size()
model = DDP(ToyNet().cuda())
opt = TrustRatioSGD(model.parameters(), lr=0.0)
for step in range(20000):
    set_rate(opt, step, world)
    loss = model(torch.randn(64, 16, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
