"""Two correct ways to log under accumulation: the divided micro-losses summed over the window,
or the last one multiplied back by the count."""

# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true logged_loss_reduction_wrong=unknown
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

ACCUM = 4

dist.init_process_group("gloo")
model = DDP(ToyNet())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(200):
    batch = torch.randn(32, 16)
    opt.zero_grad()
    window_loss = 0.0
    for micro in batch.chunk(ACCUM):
        pred = model(micro)
        loss = F.mse_loss(pred, torch.zeros_like(pred)) / ACCUM
        window_loss += loss.detach().item()
        loss.backward()
    opt.step()
    if dist.get_rank() == 0:
        print(f"step {step} loss {window_loss:.4f}")  # ok: metric-reduction-wrong
        print(f"last micro-batch {loss.item() * ACCUM:.4f}")  # ok: metric-reduction-wrong
