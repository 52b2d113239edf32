"""Fine-tune a tiny MLP with accelerate, calling the model through ``model.module``.

Launched with ``torchrun --nproc_per_node 2 module_bypass.py --cpu``. Fault: the forward goes
through the module inside the DDP wrapper that prepare() made, so DDP never all-reduces the
gradients; each rank steps on its own gradients and the replicas drift apart.
"""

import argparse

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--mixed-precision", default="no", choices=["no", "bf16"])
    parser.add_argument("--cpu", action="store_true", help="train on the CPU")
    args = parser.parse_args()

    accelerator = Accelerator(
        cpu=args.cpu, gradient_accumulation_steps=2, mixed_precision=args.mixed_precision
    )
    set_seed(42)

    x = torch.randn(256, 16)
    y = (x[:, 0] > 0).long()
    dataset = TensorDataset(x, y)
    loader = DataLoader(dataset, batch_size=8, shuffle=True)

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    loss_fn = nn.CrossEntropyLoss()

    step = 0
    model.train()
    for epoch in range(2):
        for inputs, labels in loader:
            with accelerator.accumulate(model):
                # the prepared model is a DistributedDataParallel; call the plain module
                logits = model.module(inputs)
                loss = loss_fn(logits, labels)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                step += 1
                if step % 4 == 0:
                    accelerator.print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
                if step >= args.steps:
                    break
        if step >= args.steps:
            break

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
