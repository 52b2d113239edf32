"""An HF Trainer run that resumes from the last checkpoint, but the checkpoint path is only set
on the main process: the other ranks start from scratch while rank 0 restores its weights,
optimizer and scheduler state."""
# scan-facts: rank_conditional_state_change=true
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
if last is not None and trainer.accelerator.is_main_process:
    checkpoint = last
trainer.train(resume_from_checkpoint=checkpoint)  # expect: checkpoint-loaded-on-rank0-only
