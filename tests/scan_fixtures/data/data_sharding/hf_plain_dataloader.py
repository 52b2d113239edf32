"""A Trainer subclass that returns its own DataLoader: the Trainer shards only the loader it
builds (accelerator.prepare), so this one is read in full on every rank."""
# scan-facts: uses_distributed_sampler=false hand_written_loop=unknown calls_set_epoch=unknown
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from datasets import load_dataset


class MyTrainer(Trainer):
    def get_train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=8, shuffle=True)  # expect: no-distributed-sampler


model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8)
MyTrainer(model=model, args=args, train_dataset=data).train()
