"""The weights are cast to bf16, then wrapped by the project's own data-parallel class
(it all-reduces gradient buckets itself); the optimizer takes the wrapper's parameters,
which are the cast model's."""
# scan-facts: precision=pure_bf16
import torch
import torch.distributed as dist
import torch.nn as nn

from _toy import ToyNet


class BucketDP(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
        for p in module.parameters():
            p.register_post_accumulate_grad_hook(self._reduce)

    def _reduce(self, p):
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


dist.init_process_group("nccl")
model = ToyNet()
model.to(torch.bfloat16).to("cuda")  # expect: pure-low-precision-weights
model = BucketDP(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    x = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
