"""An HF Trainer whose DeepSpeed config path is a command-line option (None by default): the
run may name a ZeRO config, so "no FSDP/ZeRO" is not decided from the missing ``fsdp=``."""
# scan-facts: uses_fsdp_or_zero=unknown hand_written_loop=false
import argparse

from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--deepspeed", type=str, default=None)
parser.add_argument("--local_rank", type=int, default=-1)
args = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained("EleutherAI/pythia-1b")
model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-1b")
data = load_dataset("databricks/databricks-dolly-15k")["train"]
data = data.map(lambda ex: tokenizer(ex["response"], truncation=True, max_length=512))

training_args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=4,
    learning_rate=1e-5,
    bf16=True,
    deepspeed=args.deepspeed,
    local_rank=args.local_rank,
)
trainer = Trainer(model=model, args=training_args, train_dataset=data, tokenizer=tokenizer)
trainer.train()
