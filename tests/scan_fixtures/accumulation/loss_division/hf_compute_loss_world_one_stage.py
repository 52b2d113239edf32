"""Two Trainer subclasses, one per stage named on the command line; only the DPO one divides its
loss by the world size, so whether the run's loss is divided depends on the stage."""
# scan-facts: loss_divided_by_world_size=unknown
import argparse

import torch.distributed as dist
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from datasets import load_dataset


class SupervisedTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        return super().compute_loss(model, inputs, return_outputs, **kwargs)


class PreferenceTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        loss = super().compute_loss(model, inputs, return_outputs, **kwargs)
        loss = loss / dist.get_world_size()  # ok: loss-divided-by-world-size
        return loss


parser = argparse.ArgumentParser()
parser.add_argument("--stage", default="sft")
opts = parser.parse_args()
model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4)
if opts.stage == "sft":
    trainer = SupervisedTrainer(model=model, args=args, train_dataset=data)
else:
    trainer = PreferenceTrainer(model=model, args=args, train_dataset=data)
trainer.train()
