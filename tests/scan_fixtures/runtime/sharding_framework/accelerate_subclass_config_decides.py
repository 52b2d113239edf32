"""A project's thin subclass of accelerate's Accelerator prepares the model: prepare() wraps
it as the launch's accelerate config says (DDP, FSDP or DeepSpeed), which the code does not
show; accumulate() and backward() are still accelerate's."""

# scan-facts: uses_fsdp_or_zero=unknown hand_written_loop=true loss_divided_by_accum=true
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
