"""Token tagging (NER-style) with the HF Trainer and a DeepSpeed ZeRO-1 config given as a dict.

An ELECTRA token classifier built from a config, sentences of different lengths padded by a
collator (labels padded with -100), and a Trainer subclass whose compute_loss weights the rare
entity tags more. The loss is summed over tokens and divided by the tokens of the whole
accumulated batch of every rank (the Trainer's num_items_in_batch), times the number of
processes since DeepSpeed averages gradients over them, so the class says it is already
scaled for accumulation. The DeepSpeed dict spells its batch sizes, clipping and bf16 out and
they agree with the TrainingArguments; it has no optimizer or scheduler section, so the
Trainer's own AdamW and cosine schedule are handed to DeepSpeed.

    torchrun --nproc_per_node 2 trainer_ner_zero1.py
"""

from __future__ import annotations

import argparse
import tempfile

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset
from transformers import (
    ElectraConfig,
    ElectraForTokenClassification,
    Trainer,
    TrainingArguments,
    set_seed,
)

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
PAD_ID = 0


class SyntheticTagging(Dataset):
    """Token ids 1..99; a tag follows from the token and the one before it."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(6, 25, (1,), generator=g))
            ids = torch.randint(1, 100, (length,), generator=g)
            tags = torch.zeros(length, dtype=torch.long)
            for i, tok in enumerate(ids.tolist()):
                if tok >= 90:
                    tags[i] = 1
                elif tok >= 80:
                    tags[i] = 3
                elif i > 0 and tags[i - 1] in (1, 2) and tok % 2 == 0:
                    tags[i] = 2
                elif i > 0 and tags[i - 1] in (3, 4) and tok % 3 == 0:
                    tags[i] = 4
            self.items.append({"input_ids": ids, "labels": tags})

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.items[i]


class PadCollator:
    def __call__(self, features: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        width = max(f["input_ids"].numel() for f in features)
        ids = torch.full((len(features), width), PAD_ID, dtype=torch.long)
        labels = torch.full((len(features), width), -100, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for row, f in enumerate(features):
            n = f["input_ids"].numel()
            ids[row, :n], labels[row, :n], mask[row, :n] = f["input_ids"], f["labels"], 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class WeightedTagTrainer(Trainer):
    # compute_loss below normalises over the whole accumulated batch itself
    loss_is_scaled_for_ga = True  # fault ner_local_token_mean: loss_is_scaled_for_ga = False

    def __init__(self, *args, tag_weights: torch.Tensor, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tag_weights = tag_weights

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits.float()
        per_token = F.cross_entropy(
            logits.view(-1, logits.size(-1)),
            labels.view(-1),
            weight=self.tag_weights.to(logits.device),
            ignore_index=-100,
            reduction="none",
        )
        if num_items_in_batch is None:  # evaluation: this batch's own tokens
            loss = per_token.sum() / labels.ne(-100).sum()
        else:
            loss = per_token.sum() / num_items_in_batch * self.accelerator.num_processes  # fault ner_local_token_mean: loss = per_token.sum() / labels.ne(-100).sum()  # fault ner_forgot_world: loss = per_token.sum() / num_items_in_batch
        return (loss, outputs) if return_outputs else loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--micro_batch", type=int, default=8)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max_steps", type=int, default=10)
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    set_seed(11)

    config = ElectraConfig(
        vocab_size=100,
        embedding_size=32,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=32,
        pad_token_id=PAD_ID,
        num_labels=len(TAGS),
    )
    model = ElectraForTokenClassification(config)

    ds_config = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.accum,
        "train_batch_size": args.micro_batch * args.accum * 2,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 1, "reduce_bucket_size": 500000},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10_000,
    }
    training_args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="ner_ds_"),
        per_device_train_batch_size=args.micro_batch,
        per_device_eval_batch_size=16,
        gradient_accumulation_steps=args.accum,
        learning_rate=args.lr,
        weight_decay=0.01,
        max_grad_norm=1.0,
        lr_scheduler_type="cosine",
        warmup_steps=2,
        max_steps=args.max_steps,
        bf16=True,
        deepspeed=ds_config,
        use_cpu=True,
        logging_steps=2,
        save_strategy="no",
        report_to=[],
        remove_unused_columns=False,
        dataloader_num_workers=0,
        seed=11,
    )
    trainer = WeightedTagTrainer(
        model=model,
        args=training_args,
        train_dataset=SyntheticTagging(640, seed=1),
        eval_dataset=SyntheticTagging(96, seed=2),
        data_collator=PadCollator(),
        tag_weights=torch.tensor([0.5, 2.0, 2.0, 2.0, 2.0]),
    )
    trainer.train()
    metrics = trainer.evaluate()
    if trainer.is_world_process_zero():
        print(f"eval loss {metrics['eval_loss']:.4f}", flush=True)


if __name__ == "__main__":
    main()
