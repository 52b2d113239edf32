"""Regression MLP with accelerate: gradient accumulation through accelerator.accumulate()."""

import gc

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"lr": 3e-3, "epochs": 2, "batch_size": 8, "accum": 2, "max_grad_norm": 1.0, "seed": 17}


def get_dataloader(batch_size):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 10, generator=g)
    w = torch.randn(10, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(96, 1, generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True)


def training_function(config):
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=config["accum"])
    set_seed(config["seed"])
    model = nn.Sequential(
        nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 1)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    train_dl = get_dataloader(config["batch_size"])
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=config["lr"],
        total_steps=config["epochs"] * len(train_dl) // config["accum"] + 1,
    )
    model, optimizer, train_dl, scheduler = accelerator.prepare(
        model, optimizer, train_dl, scheduler
    )

    loss_fn = nn.MSELoss()
    for epoch in range(config["epochs"]):
        model.train()
        total = 0.0
        for x, y in train_dl:
            with accelerator.accumulate(model):
                loss = loss_fn(model(x), y)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), config["max_grad_norm"])
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            total += accelerator.gather_for_metrics(loss.detach()).mean().item()
        accelerator.print(f"epoch {epoch}: mean loss {total / len(train_dl):.4f}")

    accelerator.wait_for_everyone()
    accelerator.end_training()
    del model, optimizer
    gc.collect()


if __name__ == "__main__":
    training_function(CONFIG)
