"""TrainingArguments built from a mapping the run's config fills (**kwargs): a field the scan
does not see among its keys may be in the mapping, so the Trainer's defaults (one micro-batch,
no warmup) are not the run's values."""
# scan-facts: grad_accum_steps=unknown warmup_steps=unknown
import yaml
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from datasets import load_dataset

with open("run.yml") as f:
    cfg = yaml.safe_load(f)
kwargs = {k: v for k, v in cfg.items() if k in ("gradient_accumulation_steps", "warmup_steps", "bf16")}
args = TrainingArguments(output_dir="out", logging_first_step=True, **kwargs)
model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("imdb", split="train")
Trainer(model=model, args=args, train_dataset=data).train()
