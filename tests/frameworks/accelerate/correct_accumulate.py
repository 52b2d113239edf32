"""Fine-tune a tiny MLP classifier with accelerate: accumulation, clipping, a scheduler.

Launched with ``torchrun --nproc_per_node 2 correct_accumulate.py --cpu`` (accelerate reads the
torchrun environment). Correct: accumulate() decides when gradients sync and when the prepared
optimizer really steps; the prepared dataloader shards batches across ranks.
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

    accelerator = Accelerator(  # fault accum_not_scaled: accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision) || accumulation_steps = 2
        cpu=args.cpu, gradient_accumulation_steps=2, mixed_precision=args.mixed_precision  # fault accum_not_scaled: -
    )  # fault accum_not_scaled: -
    set_seed(42)

    x = torch.randn(256, 16)
    y = (x[:, 0] > 0).long()
    dataset = TensorDataset(x, y)
    loader = DataLoader(dataset, batch_size=8, shuffle=True)

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)  # fault loader_not_prepared: model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    loss_fn = nn.CrossEntropyLoss()  # fault weights_changed_rank0: = || if accelerator.is_main_process: || >torch.manual_seed(1234) || >warm_start = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)) || >accelerator.unwrap_model(model).load_state_dict(warm_start.state_dict())

    step = 0
    model.train()
    for epoch in range(2):
        for inputs, labels in loader:  # fault accum_not_scaled: for i, (inputs, labels) in enumerate(loader):
            with accelerator.accumulate(model):  # fault accum_not_scaled: -
                logits = model(inputs)  # fault module_bypass: logits = model.module(inputs)  # fault accum_not_scaled: <=
                loss = loss_fn(logits, labels)  # fault accum_not_scaled: <=
                accelerator.backward(loss)  # fault accum_not_scaled: <=
                if accelerator.sync_gradients:  # fault accum_not_scaled: <if (i + 1) % accumulation_steps == 0:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)  # fault accum_not_scaled: <=
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:  # fault accum_not_scaled: -
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
