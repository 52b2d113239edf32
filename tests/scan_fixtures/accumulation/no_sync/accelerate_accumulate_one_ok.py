"""``accelerator.accumulate()`` kept in a loop whose Accelerator takes one micro-batch per step:
it never enters no_sync, so every backward syncs."""
# scan-facts: uses_no_sync=false final_micro_step_synced=true
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

accelerator = Accelerator(gradient_accumulation_steps=1)
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
