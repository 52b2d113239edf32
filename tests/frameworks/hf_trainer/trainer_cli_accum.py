"""Causal-LM pretraining with the HF Trainer; TrainingArguments from the command line.

    torchrun --nproc_per_node 2 trainer_cli_accum.py --output_dir out --use_cpu \
        --gradient_accumulation_steps 2 --max_steps 8 --report_to none --save_strategy no
"""

from dataclasses import dataclass, field

from random_tokens import RandomTokens
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    n_layer: int = field(default=2)
    n_embd: int = field(default=32)
    vocab_size: int = field(default=128)
    seq_len: int = field(default=16)
    num_samples: int = field(default=256)


def main() -> None:
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()

    config = GPT2Config(
        n_layer=model_args.n_layer,
        n_head=2,
        n_embd=model_args.n_embd,
        vocab_size=model_args.vocab_size,
        n_positions=model_args.seq_len,
    )
    model = GPT2LMHeadModel(config)
    train_dataset = RandomTokens(model_args.num_samples, model_args.seq_len, config.vocab_size)

    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
    trainer.train()


if __name__ == "__main__":
    main()
