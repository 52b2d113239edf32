"""A Bradley-Terry reward model: chosen and rejected answers are padded to the longest in the
batch, but the model gives one score per sequence and the loss compares the two scores of
each pair, so the padding says nothing about a varying number of target tokens."""
# scan-facts: variable_length_sequences=unknown
import torch.nn as nn
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

from datasets import load_dataset

tokenizer = AutoTokenizer.from_pretrained("google/gemma-2b-it")
model = AutoModelForSequenceClassification.from_pretrained("google/gemma-2b-it", num_labels=1)


def collate(rows):
    texts = [t for r in rows for t in (r["chosen"], r["rejected"])]
    return tokenizer(texts, padding=True, truncation=True, max_length=4096, return_tensors="pt")


class PairTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        scores = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])[0]
        chosen, rejected = scores[0::2], scores[1::2]
        return -nn.functional.logsigmoid(chosen - rejected).mean()


args = TrainingArguments(output_dir="rm", per_device_train_batch_size=1, gradient_accumulation_steps=32,
                         remove_unused_columns=False, learning_rate=1e-5, bf16=True)
data = load_dataset("hendrydong/preference_700K", split="train")
PairTrainer(model=model, args=args, train_dataset=data, data_collator=collate).train()
