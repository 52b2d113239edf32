"""The loss is divided by the accumulation count for backward, and that divided value of the last
micro-batch is what gets logged: the curve reads about k times too low."""

# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true logged_loss_reduction_wrong=true
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
    for micro in batch.chunk(ACCUM):
        pred = model(micro)
        loss = F.mse_loss(pred, torch.zeros_like(pred)) / ACCUM
        loss.backward()
    opt.step()
    if dist.get_rank() == 0:
        print({"train/loss": loss.detach().item()})  # expect: metric-reduction-wrong
