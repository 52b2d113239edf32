"""Causal LM pre-training with accelerate, DeepSpeed ZeRO-1 and the optimizer from the DS config.

The DeepSpeed config is a dict in accelerate's config style: "auto" for what accelerate fills in
(bf16 from mixed_precision, the optimizer's lr and weight decay from DummyOptim, the warmup from
DummyScheduler), explicit micro-batch size, ZeRO stage, clipping and accumulation. A GPT-NeoX built from its config reads a synthetic token stream packed into fixed
blocks; the loop runs under accelerator.accumulate, evaluates perplexity with
gather_for_metrics and saves accelerate's state (the DeepSpeed checkpoint) after every epoch.

    torchrun --nproc_per_node 2 accelerate_neox_zero1.py
"""

from __future__ import annotations

import argparse
import gc
import math
import tempfile

import torch
from accelerate import Accelerator, DeepSpeedPlugin, PartialState
from accelerate.utils import (
    DistributedType,
    DummyOptim,
    DummyScheduler,
    broadcast_object_list,
    set_seed,
)
from torch.utils.data import DataLoader, Dataset
from transformers import AutoModelForCausalLM, GPTNeoXConfig

DS_CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0,  # fault neox_torch_clip: "gradient_clipping": 0.0,
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 1, "reduce_bucket_size": 500000, "allgather_bucket_size": 500000},
    "optimizer": {
        "type": "AdamW",
        "params": {"lr": "auto", "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": "auto"},
    },
    "scheduler": {
        "type": "WarmupLR",
        "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"},
    },
    "steps_per_print": 10_000,
}


class PackedStream(Dataset):
    """A token stream from a sparse random bigram chain, cut into blocks of block_size."""

    def __init__(self, n_blocks: int, block_size: int, vocab: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        successors = torch.randint(0, vocab, (vocab, 3), generator=torch.Generator().manual_seed(99))
        tokens = [int(torch.randint(0, vocab, (1,), generator=g))]
        for _ in range(n_blocks * block_size - 1):
            tokens.append(int(successors[tokens[-1], int(torch.randint(0, 3, (1,), generator=g))]))
        self.blocks = torch.tensor(tokens).view(n_blocks, block_size)

    def __len__(self) -> int:
        return self.blocks.size(0)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.blocks[i], "labels": self.blocks[i]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup_steps", type=int, default=4)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()

    PartialState(cpu=True)  # CPU-only machine: gloo, before the Accelerator
    accelerator = Accelerator(
        mixed_precision="bf16",
        deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=DS_CONFIG),
    )
    assert accelerator.distributed_type == DistributedType.DEEPSPEED
    set_seed(args.seed)

    vocab = 128
    config = GPTNeoXConfig(
        vocab_size=vocab,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=192,
        max_position_embeddings=64,
        rotary_pct=0.5,
        use_parallel_residual=True,
    )
    model = AutoModelForCausalLM.from_config(config)

    train_loader = DataLoader(PackedStream(96, 32, vocab, seed=1), batch_size=args.batch_size, shuffle=True)
    eval_loader = DataLoader(PackedStream(16, 32, vocab, seed=2), batch_size=args.batch_size)

    optimizer = DummyOptim(model.parameters(), lr=args.lr, weight_decay=0.1)
    lr_scheduler = DummyScheduler(optimizer, warmup_num_steps=args.warmup_steps)
    model, optimizer, train_loader, eval_loader, lr_scheduler = accelerator.prepare(  # fault neox_loader_unprepared: model, optimizer, eval_loader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, lr_scheduler  # fault neox_loader_unprepared: model, optimizer, eval_loader, lr_scheduler
    )
    ckpt_root = [tempfile.mkdtemp(prefix="neox_ds_") if accelerator.is_main_process else None]
    ckpt_root = broadcast_object_list(ckpt_root)[0]  # one checkpoint folder for every rank

    for epoch in range(args.epochs):
        model.train()
        for step, batch in enumerate(train_loader):
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)  # fault neox_torch_clip: = || if accelerator.sync_gradients: || >torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients and step % 4 == 3:
                mean_loss = accelerator.reduce(loss.detach().float(), reduction="mean")
                accelerator.print(f"epoch {epoch} step {step}: loss {mean_loss.item():.4f} lr {lr_scheduler.get_last_lr()[0]:.2e}")

        model.eval()
        losses = []
        for batch in eval_loader:
            with torch.no_grad():
                loss = model(**batch).loss
            losses.append(accelerator.gather_for_metrics(loss.float().repeat(batch["input_ids"].size(0))))
        eval_loss = torch.cat(losses).mean().item()
        accelerator.print(f"epoch {epoch}: eval loss {eval_loss:.4f} perplexity {math.exp(eval_loss):.2f}")
        accelerator.save_state(f"{ckpt_root}/epoch_{epoch}")

    accelerator.end_training()
    del model, optimizer, lr_scheduler
    gc.collect()


if __name__ == "__main__":
    main()
