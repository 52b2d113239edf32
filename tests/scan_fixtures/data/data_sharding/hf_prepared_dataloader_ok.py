"""A Trainer subclass with its own DataLoader, handed to accelerator.prepare as the Trainer does:
sharded per process."""
# scan-facts: uses_distributed_sampler=true
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from datasets import load_dataset


class MyTrainer(Trainer):
    def get_train_dataloader(self):
        loader = DataLoader(self.train_dataset, batch_size=8, shuffle=True)  # ok: no-distributed-sampler
        return self.accelerator.prepare(loader)


model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8)
MyTrainer(model=model, args=args, train_dataset=data).train()
