"""Only the embedding table is cast to bf16 (to save memory); the rest of the model keeps
fp32 weights and its own layers cast to a compute dtype in forward. A layer's cast is not
the model's precision, so it is neither pure bf16 nor plain fp32."""
# scan-facts: precision=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

COMPUTE = torch.bfloat16


class CastLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x.to(COMPUTE), self.weight.to(COMPUTE))


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(1000, 64)
        self.proj = CastLinear(64, 1000, bias=False)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Body()
        self.body.wte.to(dtype=COMPUTE)

    def forward(self, idx, targets):
        logits = self.body.proj(self.body.wte(idx))
        return F.cross_entropy(logits.float().view(-1, 1000), targets.view(-1))


dist.init_process_group("nccl")
model = DDP(TinyLM().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(1000):
    idx = torch.randint(0, 1000, (8, 32), device="cuda")
    loss = model(idx, idx)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
