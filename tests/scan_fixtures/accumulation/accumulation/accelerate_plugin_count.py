"""accelerate with the accumulation count in a GradientAccumulationPlugin built from the
arguments: the count is the run's; the loss scaling is accelerate's either way."""
# scan-facts: grad_accum_steps=unknown loss_divided_by_accum=true
import argparse

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import GradientAccumulationPlugin
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
args = parser.parse_args()

plugin = GradientAccumulationPlugin(num_steps=args.gradient_accumulation_steps, sync_each_batch=False)
accelerator = Accelerator(gradient_accumulation_plugin=plugin, mixed_precision="bf16")
model = ToyNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(ToyDataset(512), batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        accelerator.backward(loss)  # ok: grad-accum-loss-not-scaled
        optimizer.step()
        optimizer.zero_grad()
