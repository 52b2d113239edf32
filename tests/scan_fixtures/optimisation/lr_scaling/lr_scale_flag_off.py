"""Fine-tuning script with an opt-in `--scale_lr`: the learning rate is multiplied by the
number of processes only when the flag is passed, and it is off by default."""
# scan-facts: lr_scaling=unknown
import argparse

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--learning_rate", type=float, default=1e-4)
parser.add_argument("--scale_lr", action="store_true", default=False)
parser.add_argument("--train_batch_size", type=int, default=16)
parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
args = parser.parse_args()

accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
if args.scale_lr:
    args.learning_rate = (
        args.learning_rate
        * args.gradient_accumulation_steps
        * args.train_batch_size
        * accelerator.num_processes
    )
model = ToyNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)  # ok: lr-scaled-too-aggressively
loader = DataLoader(ToyDataset(1024), batch_size=args.train_batch_size, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for epoch in range(3):
    for batch in loader:
        with accelerator.accumulate(model):
            loss = F.mse_loss(model(batch["x"]), batch["x"])
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
