"""accelerate handed a DeepSpeed ZeRO-2 plugin: accumulate() enters no_sync only below ZeRO-2,
so whether micro-steps skip the sync is the engine's business, not read as no_sync."""
# scan-facts: uses_no_sync=unknown loss_divided_by_accum=true
import torch
import torch.nn.functional as F
from accelerate import Accelerator, DeepSpeedPlugin
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=2, gradient_clipping=1.0)
accelerator = Accelerator(deepspeed_plugin=plugin)
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
