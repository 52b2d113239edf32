"""The HF Trainer is handed a packing IterableDataset of the project (constant-length chunks of
a shuffled text stream). The Trainer has no sampler to set an epoch on, and the class defines
no set_epoch for it to call, so whether each pass reshuffles is the stream's: undecided."""
# scan-facts: calls_set_epoch=unknown
import torch
from torch.utils.data import IterableDataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

from datasets import load_dataset


class PackedStream(IterableDataset):
    def __init__(self, tokenizer, texts, seq_length=1024):
        self.tokenizer = tokenizer
        self.texts = texts
        self.seq_length = seq_length

    def __iter__(self):
        buffer = []
        for text in self.texts:
            buffer.extend(self.tokenizer(text)["input_ids"] + [self.tokenizer.eos_token_id])
            while len(buffer) >= self.seq_length:
                chunk, buffer = buffer[: self.seq_length], buffer[self.seq_length :]
                ids = torch.tensor(chunk)
                yield {"input_ids": ids, "labels": ids}


tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2")
texts = load_dataset("bigcode/the-stack-smol", split="train", streaming=True).shuffle(buffer_size=5000)
train_data = PackedStream(tokenizer, (row["content"] for row in texts))
args = TrainingArguments(output_dir="out", max_steps=1000, per_device_train_batch_size=1)
trainer = Trainer(model=model, args=args, train_dataset=train_data)  # ok: sampler-set-epoch-missing
trainer.train()
