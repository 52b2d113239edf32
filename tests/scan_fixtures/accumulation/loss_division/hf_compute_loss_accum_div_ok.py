"""A Trainer subclass whose own micro-batch mean is divided by the accumulation steps (the model
takes no loss kwargs): a correct loss, and no world-size factor anywhere in it."""
# scan-facts: loss_divided_by_world_size=false loss_multiplied_by_world_size=false
import torch.nn.functional as F
from torch import nn
from transformers import Trainer, TrainingArguments

from datasets import load_dataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 1)

    def forward(self, features, labels=None):
        return self.head(features)


class MeanTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        pred = model(**inputs)
        loss = F.mse_loss(pred.squeeze(-1), labels)
        return loss / self.args.gradient_accumulation_steps  # ok: loss-divided-by-world-size


data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, gradient_accumulation_steps=2)
MeanTrainer(model=Regressor(), args=args, train_dataset=data).train()
