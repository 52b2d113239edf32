"""Image classification with accelerate and a DeepSpeed ZeRO-3 plugin given as keyword arguments.

A ViT built from its config under ZeRO-3 (accelerate turns on zero.Init before from_config),
bf16 mixed precision, a torch AdamW and transformers' linear warmup schedule prepared with the
model. The schedule counts steps the way accelerate steps a prepared scheduler (once per
process on every optimizer step), as the accelerate examples do. Random flips, shifts and noise
are drawn in the collate function from a generator seeded per process. The loop runs under
accelerator.accumulate, logs the loss averaged over processes, evaluates with
gather_for_metrics and saves the gathered 16-bit weights.

    torchrun --nproc_per_node 2 accelerate_vit_zero3.py
"""

from __future__ import annotations

import argparse
import gc
import math
import tempfile
from functools import partial

import torch
from accelerate import Accelerator, DeepSpeedPlugin, PartialState
from accelerate.utils import DistributedType, set_seed
from torch.utils.data import DataLoader, TensorDataset
from transformers import AutoModelForImageClassification, ViTConfig, get_linear_schedule_with_warmup


def synthetic_images(n: int, seed: int, classes: int = 5) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(classes, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    labels = torch.randint(0, classes, (n,), generator=g)
    return TensorDataset(prototypes[labels] + 0.6 * torch.randn(n, 3, 16, 16, generator=g), labels)


def augment_collate(batch, gen: torch.Generator):
    images = torch.stack([b[0] for b in batch])
    labels = torch.stack([b[1] for b in batch])
    flip = torch.rand(images.size(0), generator=gen) < 0.5
    images[flip] = images[flip].flip(-1)
    shifts = torch.randint(-2, 3, (2,), generator=gen)
    images = torch.roll(images, shifts=(int(shifts[0]), int(shifts[1])), dims=(-2, -1))
    images = images + 0.1 * torch.randn(images.shape, generator=gen)
    return {"pixel_values": images, "labels": labels}


def eval_collate(batch):
    return {"pixel_values": torch.stack([b[0] for b in batch]), "labels": torch.stack([b[1] for b in batch])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    PartialState(cpu=True)  # CPU-only machine: gloo, before the Accelerator
    plugin = DeepSpeedPlugin(
        zero_stage=3,
        gradient_accumulation_steps=args.accum,
        gradient_clipping=1.0,
        zero3_init_flag=True,
        zero3_save_16bit_model=True,
    )
    accelerator = Accelerator(
        mixed_precision="bf16", gradient_accumulation_steps=args.accum, deepspeed_plugin=plugin
    )
    assert accelerator.distributed_type == DistributedType.DEEPSPEED
    set_seed(args.seed)
    # augmentation draws from its own generator, one stream per process
    aug_gen = torch.Generator().manual_seed(args.seed + accelerator.process_index)  # fault vit_same_augment: aug_gen = torch.Generator().manual_seed(args.seed)

    config = ViTConfig(
        image_size=16,
        patch_size=4,
        num_channels=3,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=96,
        num_labels=5,
    )
    model = AutoModelForImageClassification.from_config(config)

    train_loader = DataLoader(
        synthetic_images(192, seed=1), batch_size=args.batch_size, shuffle=True, collate_fn=partial(augment_collate, gen=aug_gen)
    )
    eval_loader = DataLoader(synthetic_images(64, seed=2), batch_size=16, collate_fn=eval_collate)

    no_decay = ("bias", "layernorm", "LayerNorm")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": 0.05},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.lr)
    updates_per_epoch = math.ceil(len(train_loader) / accelerator.num_processes / args.accum)
    max_train_steps = args.epochs * updates_per_epoch
    scheduler = get_linear_schedule_with_warmup(
        optimizer,
        num_warmup_steps=args.warmup_steps * accelerator.num_processes,  # fault vit_sched_unscaled: num_warmup_steps=args.warmup_steps,
        num_training_steps=max_train_steps * accelerator.num_processes,  # fault vit_sched_unscaled: num_training_steps=max_train_steps,
    )
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )

    completed = 0
    for epoch in range(args.epochs):
        model.train()
        for batch in train_loader:
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    grad_norm = accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                completed += 1
                logged = accelerator.reduce(loss.detach(), reduction="mean")  # fault vit_rank0_loss: logged = loss.detach()
                if accelerator.is_main_process:
                    print(
                        f"update {completed}: loss {logged.item():.4f} lr {scheduler.get_last_lr()[0]:.2e} "
                        f"grad norm {float(grad_norm or 0.0):.3f}",
                        flush=True,
                    )

        model.eval()
        correct, total = 0, 0
        for batch in eval_loader:
            with torch.no_grad():
                logits = model(pixel_values=batch["pixel_values"]).logits
            preds, labels = accelerator.gather_for_metrics((logits.argmax(-1), batch["labels"]))
            correct += (preds == labels).sum().item()
            total += labels.numel()
        accelerator.print(f"epoch {epoch}: eval accuracy {correct / total:.3f}")

    accelerator.wait_for_everyone()
    state_dict = accelerator.get_state_dict(model)  # gathers the ZeRO-3 shards (collective)
    accelerator.unwrap_model(model).save_pretrained(
        tempfile.mkdtemp(prefix="vit_ds_"),
        is_main_process=accelerator.is_main_process,
        save_function=accelerator.save,
        state_dict=state_dict,
    )
    accelerator.end_training()
    del model, optimizer
    gc.collect()


if __name__ == "__main__":
    main()
