"""An SFT script that subclasses TrainingArguments and fills it from the command line: the
inherited fields (accumulation, precision, warmup, batch size) are the run's flags, not
TrainingArguments' defaults."""
# scan-facts: grad_accum_steps=unknown precision=unknown warmup_steps=unknown
# scan-facts: per_gpu_batch_size=unknown uses_grad_scaler=unknown hand_written_loop=false
from dataclasses import dataclass, field

import transformers
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="facebook/opt-125m")


@dataclass
class TrainingArguments(transformers.TrainingArguments):
    model_max_length: int = field(default=512)
    optim: str = field(default="adamw_torch")


def main():
    parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    data = load_dataset("json", data_files="train.jsonl")["train"]
    trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args, train_dataset=data)
    trainer.train()


if __name__ == "__main__":
    main()
