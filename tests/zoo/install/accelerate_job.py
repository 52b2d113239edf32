"""A minimal accelerate loop, for ``accelerate launch --multi_gpu --num_processes 2`` on CPU."""

import gc

import torch
from accelerate import Accelerator

accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
for _ in range(3):
    optimizer.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()

# torch 2.13 + gloo can abort at exit while a DDP model is still alive: free it first.
del model, optimizer
gc.collect()
accelerator.wait_for_everyone()
torch.distributed.destroy_process_group()
