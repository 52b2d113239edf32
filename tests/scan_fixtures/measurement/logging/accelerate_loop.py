"""accelerate with accumulate(): the framework aligns sync and zero_grad; its prepared scheduler
steps once per process on each optimizer step, so the count per step is the world size."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=true grad_accum_steps=4
# scan-facts: loss_divided_by_accum=true zero_grad_every_micro_step=false uses_no_sync=true
# scan-facts: final_micro_step_synced=true precision=bf16_amp unscale_before_clip=true
# scan-facts: scheduler_steps_per_optimizer_step=unknown logs_rank0_only=true hand_written_loop=true uses_comm_hook=false
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import get_linear_schedule_with_warmup

from _toy import ToyDataset, ToyNet

accelerator = Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16")
model = ToyNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(ToyDataset(1024), batch_size=8, shuffle=True)  # ok: no-distributed-sampler
scheduler = get_linear_schedule_with_warmup(optimizer, 100, 5000)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
for epoch in range(3):
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(batch["x"]).pow(2).mean()
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)  # ok: clip-before-unscale, clip-on-local-grads
            optimizer.step()
            scheduler.step()  # ok: scheduler-step-miscounted
            optimizer.zero_grad()  # ok: zero-grad-inside-accumulation
    accelerator.print(f"epoch {epoch} loss {loss.item()}")  # expect: rank0-only-loss-logging
