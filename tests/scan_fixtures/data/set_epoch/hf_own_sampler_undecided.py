"""A Trainer subclass groups samples by length with a sampler of its own when an option asks
for it. The Trainer hands the epoch only to a sampler that has set_epoch, and this one has
none, so whether each epoch reshuffles alike on every rank is the sampler's, not the
Trainer's: calls_set_epoch stays undecided."""
# scan-facts: calls_set_epoch=unknown
import torch
from torch.utils.data import Sampler
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from datasets import load_dataset


class LengthGroupedSampler(Sampler):
    def __init__(self, lengths, batch_size):
        self.lengths = lengths
        self.batch_size = batch_size

    def __len__(self):
        return len(self.lengths)

    def __iter__(self):
        order = torch.randperm(len(self.lengths)).tolist()
        chunks = [order[i : i + self.batch_size * 8] for i in range(0, len(order), self.batch_size * 8)]
        grouped = [sorted(c, key=lambda i: -self.lengths[i]) for c in chunks]
        return iter([i for c in grouped for i in c])


class GroupedTrainer(Trainer):
    def _get_train_sampler(self, *args, **kwargs):
        if self.args.group_by_length:
            lengths = [len(x["input_ids"]) for x in self.train_dataset]
            return LengthGroupedSampler(lengths, self.args.train_batch_size)
        return super()._get_train_sampler(*args, **kwargs)


model = AutoModelForCausalLM.from_pretrained("gpt2")
dataset = load_dataset("imdb", split="train")
args = TrainingArguments(output_dir="out", num_train_epochs=3, group_by_length=True)
trainer = GroupedTrainer(model=model, args=args, train_dataset=dataset)  # ok: sampler-set-epoch-missing
trainer.train()
