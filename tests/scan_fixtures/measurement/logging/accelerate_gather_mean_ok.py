"""accelerate: the logged loss is the mean of every process's loss (gather, then mean), divided by
the accumulation count over the window: correct."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=false
import argparse

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--accum_steps", type=int, default=4)
args = parser.parse_args()
accelerator = Accelerator(gradient_accumulation_steps=args.accum_steps, log_with="wandb")
model = ToyNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(ToyDataset(512), batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
train_loss = 0.0
step = 0
for batch in loader:
    with accelerator.accumulate(model):
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        across = accelerator.gather(loss.repeat(8)).mean()
        train_loss += across.item() / args.accum_steps
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    if accelerator.sync_gradients:
        step += 1
        accelerator.log({"train_loss": train_loss}, step=step)  # ok: metric-reduction-wrong, rank0-only-loss-logging
        train_loss = 0.0
