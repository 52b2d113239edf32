"""A Trainer subclass with its own token-level loss; TrainingArguments from a JSON file.

    torchrun --nproc_per_node 2 trainer_json_token_loss.py trainer_args.json

The loss is summed over the micro-batch's target tokens and divided by num_items_in_batch,
the Trainer's count of target tokens over the whole accumulated batch on all ranks, then
multiplied by the number of processes because DDP averages the gradients over ranks.
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset
from transformers import (
    HfArgumentParser,
    LlamaConfig,
    LlamaForCausalLM,
    Trainer,
    TrainingArguments,
)


class PaddedTokens(Dataset):
    """Sequences of different lengths, right-padded; padding is masked out of the labels."""

    def __init__(self, n: int, seq_len: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(1, vocab, (n, seq_len), generator=g)
        self.lengths = torch.randint(seq_len // 2, seq_len + 1, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.ids[i].clone()
        n = int(self.lengths[i])
        mask = torch.zeros_like(ids)
        mask[:n] = 1
        ids[n:] = 0
        labels = ids.masked_fill(mask == 0, -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class TokenLossTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits[:, :-1, :].float()
        targets = labels[:, 1:]
        loss = F.cross_entropy(
            logits.reshape(-1, logits.size(-1)),
            targets.reshape(-1),
            ignore_index=-100,
            reduction="sum",
        )
        if num_items_in_batch is not None:
            loss = loss / num_items_in_batch
            if self.args.average_tokens_across_devices:
                loss = loss * self.accelerator.num_processes
        else:
            loss = loss / (targets != -100).sum()
        return (loss, outputs) if return_outputs else loss


def main() -> None:
    parser = HfArgumentParser(TrainingArguments)
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        (training_args,) = parser.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        (training_args,) = parser.parse_json_file(os.path.join(here, "trainer_args.json"))

    config = LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    model = LlamaForCausalLM(config)
    trainer = TokenLossTrainer(
        model=model, args=training_args, train_dataset=PaddedTokens(256, 16, 128)
    )
    trainer.train()


if __name__ == "__main__":
    main()
