"""accelerate: each step's loss goes through ``accelerator.reduce`` (whose default reduction
is a sum over the processes) into a history list, and the printed value is the history's
mean over the logged steps. Dividing by how many steps were kept is not dividing by the
world size: the printout is W times the mean loss."""
# scan-facts: logs_rank0_only=false logged_loss_reduction_wrong=true
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

accelerator = Accelerator()
model = ToyNet()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
loader = DataLoader(ToyDataset(2048), batch_size=32, shuffle=True)
model, opt, loader = accelerator.prepare(model, opt, loader)
recent = []
for step, batch in enumerate(loader):
    loss = F.mse_loss(model(batch["x"]), batch["x"])
    recent.append(accelerator.reduce(loss.detach()).item())
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
    if step % 50 == 0:
        shown = sum(recent) / len(recent)
        recent.clear()
        if accelerator.is_main_process:
            print(f"step {step} loss {shown:.4f}")  # expect: metric-reduction-wrong
