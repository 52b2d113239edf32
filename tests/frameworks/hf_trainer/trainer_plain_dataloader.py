"""A Trainer subclass that builds its own DataLoader to control shuffling.

    torchrun --nproc_per_node 2 trainer_plain_dataloader.py --max_steps 8

get_train_dataloader returns a plain DataLoader: the Trainer's own version would add the
distributed sampling (accelerator.prepare), this one reads the whole dataset on every rank,
in the same order, because the Trainer seeds every rank alike.
"""

import argparse

import torch
from random_tokens import RandomTokens
from torch.utils.data import DataLoader
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainingArguments,
)


def collate(rows: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}


class ShuffledTrainer(Trainer):
    def get_train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_dataset,
            batch_size=self.args.per_device_train_batch_size,
            shuffle=True,
            collate_fn=collate,
            drop_last=True,
        )


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("--max_steps", type=int, default=8)
    cli.add_argument("--lr", type=float, default=5e-4)
    opts = cli.parse_args()

    args = TrainingArguments(
        output_dir="/tmp/ddpadvisor-frameworks/hf_trainer/plain_dataloader",
        use_cpu=True,
        per_device_train_batch_size=4,
        max_steps=opts.max_steps,
        learning_rate=opts.lr,
        logging_steps=2,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
    )
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=16)
    model = GPT2LMHeadModel(config)
    trainer = ShuffledTrainer(model=model, args=args, train_dataset=RandomTokens())
    trainer.train()


if __name__ == "__main__":
    main()
