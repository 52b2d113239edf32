"""A project's thin subclass of accelerate's Accelerator prepares the model: prepare(),
accumulate() and backward() are still accelerate's. With no accelerate config given, prepare()
wraps in plain DDP (a config the run attaches decides instead: tests/test_scan_given.py)."""
# scan-facts: uses_fsdp_or_zero=false hand_written_loop=true loss_divided_by_accum=true
# scan-facts: uses_distributed_sampler=true
import accelerate
import torch
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet


class MyAccelerator(accelerate.Accelerator):
    """Only a nicer repr."""

    def __repr__(self):
        return f"MyAccelerator(accum={self.gradient_accumulation_steps})"


accelerator = MyAccelerator(gradient_accumulation_steps=8)
model = ToyNet()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(ToyDataset(2048), batch_size=4, shuffle=True)
model, opt, loader = accelerator.prepare(model, opt, loader)
for epoch in range(3):
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(batch["x"]).square().mean()
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
