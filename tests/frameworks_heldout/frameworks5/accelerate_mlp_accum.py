"""accelerate: an MLP regressor on a synthetic linear target, 2 micro-batches per optimizer step
through accelerator.accumulate, AdamW + cosine schedule, loss averaged over the processes for
the log line."""

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n: int = 512, dim: int = 12) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def main() -> None:
    PartialState(cpu=True)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    set_seed(0)
    model = nn.Sequential(nn.Linear(12, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=16 * accelerator.num_processes)  # fault mlp_sched_total: scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=16)  # 16 optimizer steps
    loader = DataLoader(make_data(), batch_size=16, shuffle=True)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    loss_fn = nn.MSELoss()
    step = 0
    for epoch in range(2):
        model.train()
        for x, y in loader:
            with accelerator.accumulate(model):
                loss = loss_fn(model(x), y)
                accelerator.backward(loss)  # fault mlp_plain_backward: loss.backward()
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                step += 1
                shown = accelerator.reduce(loss.detach(), reduction="mean")  # fault mlp_rank0_loss: shown = loss.detach()
                accelerator.print(f"epoch {epoch} step {step} loss {shown.item():.4f}")
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
