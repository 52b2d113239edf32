"""accelerate: each process's running loss sum is divided by all processes' forward passes but
never gathered: the logged loss is one process's mean divided by W."""
# scan-facts: logged_loss_reduction_wrong=true
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.logging import get_logger
from torch.utils.data import DataLoader

from _toy import ToyDataset, ToyNet

LOG_EVERY = 10
logger = get_logger(__name__)
accelerator = Accelerator()
model = ToyNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(ToyDataset(512), batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
total_loss = 0
done = 0
for batch in loader:
    loss = F.mse_loss(model(batch["x"]), batch["x"])
    total_loss += loss.detach().float()
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    done += 1
    if done % LOG_EVERY == 0:
        summed = total_loss.item()
        passes = LOG_EVERY * accelerator.num_processes
        logger.info(f"step {done} loss {summed / passes}")  # expect: metric-reduction-wrong
        total_loss = 0
