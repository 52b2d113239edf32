"""A small regression MLP trained with accelerate's DeepSpeedPlugin (ZeRO-2, two micro-batches
per optimizer step, clipping at 1.0): the usual accelerate loop, accelerator.accumulate and
accelerator.backward, the DeepSpeed engine built by prepare().

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 accelerate_zero2.py
"""

import torch
import torch.nn as nn
from accelerate import Accelerator, DeepSpeedPlugin
from accelerate.utils import InitProcessGroupKwargs
from torch.utils.data import DataLoader, TensorDataset


def main():
    plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=2, gradient_clipping=1.0)
    # gloo: on a machine without GPUs accelerate finds no backend of its own
    accelerator = Accelerator(
        deepspeed_plugin=plugin, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")]
    )
    accelerator.print(f"{accelerator.distributed_type}, {accelerator.num_processes} processes")
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    g = torch.Generator().manual_seed(7)
    x = torch.randn(256, 16, generator=g)
    y = x[:, :4].sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    loss_fn = nn.MSELoss()

    for epoch in range(2):
        for xb, yb in loader:
            with accelerator.accumulate(model):
                loss = loss_fn(model(xb), yb)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        mean = accelerator.gather(loss.detach().reshape(1)).mean()
        accelerator.print(f"epoch {epoch}: last loss {mean.item():.4f}")


if __name__ == "__main__":
    main()
