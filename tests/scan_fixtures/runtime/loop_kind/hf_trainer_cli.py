"""HF Trainer configured on the command line: only what the framework guarantees is known."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=true hand_written_loop=false
# scan-facts: grad_accum_steps=unknown precision=unknown warmup_steps=unknown per_gpu_batch_size=unknown
# scan-facts: lr_scaling=unknown uses_fsdp_or_zero=unknown uses_torch_compile=unknown
# scan-facts: zero_grad_every_micro_step=false final_micro_step_synced=true uses_lora=false
from dataclasses import dataclass, field

from datasets import load_dataset
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
)


@dataclass
class ModelArguments:
    model_name: str = field(default="bert-base-uncased")
    max_length: int = 128


def main():
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    tok = AutoTokenizer.from_pretrained(model_args.model_name)
    model = AutoModelForSequenceClassification.from_pretrained(model_args.model_name, num_labels=2)
    ds = load_dataset("glue", "sst2")
    ds = ds.map(lambda b: tok(b["sentence"], truncation=True, max_length=model_args.max_length), batched=True)
    trainer = Trainer(model=model, args=training_args, train_dataset=ds["train"], tokenizer=tok)
    trainer.train()


if __name__ == "__main__":
    main()
