"""Causal-LM fine-tune with the HF Trainer, arguments parsed the way run_clm.py does it.

Tiny GPT-2 built from a config; the corpus is random token ids; a few optimizer steps.
"""

import gc
import sys
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    default_data_collator,
    set_seed,
)


@dataclass
class ModelArguments:
    n_layer: int = field(default=2)
    n_embd: int = field(default=32)
    vocab_size: int = field(default=96)


@dataclass
class DataArguments:
    block_size: int = field(default=16)
    num_blocks: int = field(default=64)


class BlockDataset(torch.utils.data.Dataset):
    def __init__(self, blocks):
        self.blocks = blocks

    def __len__(self):
        return self.blocks.shape[0]

    def __getitem__(self, i):
        ids = self.blocks[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def main():
    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    set_seed(training_args.seed)

    config = GPT2Config(
        n_layer=model_args.n_layer,
        n_head=2,
        n_embd=model_args.n_embd,
        vocab_size=model_args.vocab_size,
        n_positions=data_args.block_size,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel(config)

    g = torch.Generator().manual_seed(0)
    blocks = torch.randint(
        0, config.vocab_size, (data_args.num_blocks, data_args.block_size), generator=g
    )
    train_dataset = BlockDataset(blocks)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        data_collator=default_data_collator,
    )
    result = trainer.train()
    if trainer.is_world_process_zero():
        print("train_loss", round(result.training_loss, 4))

    del trainer, model
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
