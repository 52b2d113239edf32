"""Writes the HF Trainer artifacts the attach tests read, with the real library, on the CPU.

    python tests/attach_fixtures/make_hf.py OUT_DIR

A tiny GPT-2 (config only, no download) learns sequences that count up modulo the vocabulary,
so its loss falls. ``correct``: lr 1e-3 with 20 warmup steps; ``lr_x8``: the same job with the
learning rate multiplied by 8, as a job scaled to 8 GPUs by the linear rule would have it.
Each writes the Trainer's own ``trainer_state.json`` (Trainer.state.save_to_json) and the
dicts its loop prints (stdout) to ``<name>.printed.log``.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Counting(Dataset):
    def __init__(self, n: int = 256, seq_len: int = 16, vocab: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        starts = torch.randint(0, vocab, (n, 1), generator=g)
        self.data = (starts + torch.arange(seq_len)) % vocab

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.data[i], "labels": self.data[i].clone()}


def run(out: Path, name: str, lr: float) -> None:
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=str(out / f"{name}-run"),
        use_cpu=True,
        per_device_train_batch_size=8,
        num_train_epochs=4,
        learning_rate=lr,
        warmup_steps=20,
        max_grad_norm=1.0,
        logging_steps=2,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=0,
    )
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=Counting())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainer.train()
    trainer.state.save_to_json(str(out / f"{name}.trainer_state.json"))
    (out / f"{name}.printed.log").write_text(printed.getvalue())
    (out / f"{name}.training_args.json").write_text(args.to_json_string())


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    run(target, "correct", 1e-3)
    run(target, "lr_x8", 8e-3)
