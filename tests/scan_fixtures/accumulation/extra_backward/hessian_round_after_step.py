"""A second-order optimizer: every 10th step, after the usual accumulated step, a round of
sampled-label backwards through the DDP model estimates the Hessian (its gradients feed
update_hessian, then are zeroed; no optimizer step). Every rank runs it on the same steps:
an auxiliary pass whose harm turns on rank symmetry, which no fact says, so it is not
decided; the training backward is the accumulated one (4 micro-steps), not the round after."""
# scan-facts: extra_backward_through_ddp=unknown grad_accum_steps=4
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet
from sophia import SophiaG

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = SophiaG(model.parameters(), lr=6e-4, rho=0.05)
accum = 4
for it in range(10000):
    for micro in range(accum):
        model.require_backward_grad_sync = micro == accum - 1
        x = torch.randn(8, 16, device="cuda")
        y = torch.randint(0, 4, (8,), device="cuda")
        loss = F.cross_entropy(model(x), y)
        (loss / accum).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if it % 10 == 9:
        for micro in range(2):
            model.require_backward_grad_sync = micro == 1
            logits = model(torch.randn(8, 16, device="cuda"))
            sampled = torch.distributions.Categorical(logits=logits).sample()
            (F.cross_entropy(logits, sampled) / 2).backward()
        optimizer.update_hessian()
        optimizer.zero_grad(set_to_none=True)
