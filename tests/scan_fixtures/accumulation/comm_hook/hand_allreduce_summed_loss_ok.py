"""No DDP wrapper: every rank sums its token losses (the model returns them summed) and the
gradients are summed across ranks by hand. The result is the gradient of the whole global
batch's summed loss, what one GPU computes on it: no world-size mismatch (modded-nanogpt style)."""
# scan-facts: uses_comm_hook=true comm_hook_averages=unknown loss_reduction=sum
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.head = nn.Linear(32, 100)

    def forward(self, idx, targets):
        logits = self.head(self.emb(idx))
        return F.cross_entropy(logits.view(-1, 100), targets.view(-1), reduction="sum")


dist.init_process_group("gloo")
model = TinyLM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(50):
    idx = torch.randint(0, 100, (4, 16))
    model(idx, idx).backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)  # ok: custom-comm-hook-scaling
    opt.step()
    model.zero_grad(set_to_none=True)
