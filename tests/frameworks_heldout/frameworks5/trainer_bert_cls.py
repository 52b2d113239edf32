"""HF Trainer: a tiny random BERT classifies token sequences (is token 0 in the upper half of
the vocabulary?). A Trainer subclass builds its own training DataLoader; 2 micro-batches per
optimizer step, 12 steps, AdamW + linear warmup, on CPU."""

import os
import tempfile

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Parity(Dataset):
    def __init__(self, n: int = 256, length: int = 16, vocab: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, vocab, (n, length), generator=g)
        self.labels = (self.ids[:, 0] >= vocab // 2).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class ShuffledTrainer(Trainer):
    def get_train_dataloader(self) -> DataLoader:
        loader = DataLoader(
            self.train_dataset,
            batch_size=self.args.per_device_train_batch_size,
            shuffle=True,
            drop_last=True,
        )
        return self.accelerator.prepare(loader)  # fault bert_custom_loader: return loader


def main() -> None:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    # transformers 5.24's BERT head declares **kwargs but computes a plain mean loss, so the
    # Trainer would skip its division by the accumulation steps (added by the lead after the
    # blind measurement: huggingface/transformers#47688)
    model.accepts_loss_kwargs = False
    world = int(os.environ.get("WORLD_SIZE", "1"))
    accum = 2
    if os.environ.get("RANK", "0") == "0":
        print(f"global batch {8 * world * accum}")
    lr = 5e-4  # fault bert_lr_scaled: lr = 5e-4 * world * accum  # linear scaling rule
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="bert_cls_"),
        use_cpu=True,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=accum,
        max_steps=12,
        learning_rate=lr,
        warmup_steps=2,
        weight_decay=0.01,
        logging_steps=2,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    trainer = ShuffledTrainer(model=model, args=args, train_dataset=Parity())
    trainer.train()


if __name__ == "__main__":
    main()
