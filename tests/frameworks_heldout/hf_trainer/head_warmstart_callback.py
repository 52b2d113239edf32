"""Sequence classification with Trainer; a callback warm-starts the classifier head.

The head weights come from an earlier run; the callback loads them on the main process
when training begins (there is no checkpoint file here, so the 'earlier run' is a fresh
head built with another seed).
"""

import argparse
import gc

import torch
import torch.distributed as dist
from torch import nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


class WarmStartHead(TrainerCallback):
    def __init__(self, head_state):
        self.head_state = head_state

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.is_world_process_zero:
            model.classifier.load_state_dict(self.head_state)
            print("classifier head warm-started")


class ToyPairs(torch.utils.data.Dataset):
    def __init__(self, n, seq_len, vocab, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(5, vocab, (n, seq_len), generator=g)
        self.labels = (self.ids[:, 0] % 3).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones_like(self.ids[i]),
            "labels": self.labels[i],
        }


def previous_head(hidden, num_labels):
    torch.manual_seed(77)
    return nn.Linear(hidden, num_labels).state_dict()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", default="/tmp/ddpadvisor-heldout/head")
    a = p.parse_args()

    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=3,
    )
    torch.manual_seed(42)
    model = BertForSequenceClassification(config)

    training_args = TrainingArguments(
        output_dir=a.out,
        max_steps=a.steps,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        weight_decay=0.01,
        lr_scheduler_type="constant",
        logging_steps=1,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=ToyPairs(128, 12, config.vocab_size, seed=3),
        callbacks=[WarmStartHead(previous_head(config.hidden_size, config.num_labels))],
    )
    trainer.train()

    del trainer, model
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
