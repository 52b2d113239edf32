"""The same resume with the checkpoint path set on every rank; only the log line is for the main
process."""
# scan-facts: rank_conditional_state_change=false
import os

from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

out_dir = "runs/sft"
tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("imdb")["train"].map(lambda ex: tokenizer(ex["text"], truncation=True))
args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=8, num_train_epochs=1)
trainer = Trainer(model=model, args=args, train_dataset=data)
last = get_last_checkpoint(out_dir) if os.path.isdir(out_dir) else None
checkpoint = None
if last is not None:
    checkpoint = last
    if trainer.accelerator.is_main_process:
        print(f"resuming from {last}")
trainer.train(resume_from_checkpoint=checkpoint)  # ok: checkpoint-loaded-on-rank0-only
