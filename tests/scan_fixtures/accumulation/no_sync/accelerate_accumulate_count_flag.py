"""``accelerator.accumulate()`` with its count from a flag that defaults to 1: it skips the
gradient sync only when the run accumulates, so whether no_sync is used is the run's choice;
the step's own micro-batch always syncs."""
# scan-facts: uses_no_sync=unknown final_micro_step_synced=true
import argparse

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--grad-accum", type=int, default=1)
args = parser.parse_args()
accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)
model = ToyNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(ToyDataset(512), batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for epoch in range(5):
    for batch in loader:
        with accelerator.accumulate(model):  # ok: no-sync-misaligned
            loss = F.mse_loss(model(batch["x"]), batch["x"])
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
