"""accelerate with no count in the code: `accelerate launch --gradient_accumulation_steps N`
sets it through the environment, so the constructor's 1 is only a default."""
# scan-facts: grad_accum_steps=unknown loss_divided_by_accum=true
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

accelerator = Accelerator()
model = ToyNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(ToyDataset(512), batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
