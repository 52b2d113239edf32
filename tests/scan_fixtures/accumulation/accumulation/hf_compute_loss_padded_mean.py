"""Padded instruction data and a Trainer subclass whose compute_loss returns the micro-batch mean
(num_items_in_batch dropped): neither divided over accumulation nor normalised by all tokens."""
# scan-facts: grad_accum_steps=2 loss_divided_by_accum=false loss_normalised_by_global_tokens=false
# scan-facts: variable_length_sequences=true
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

from datasets import load_dataset

tokenizer = AutoTokenizer.from_pretrained("gpt2")
tokenizer.pad_token = tokenizer.eos_token


def encode(example):
    return tokenizer(example["text"], padding="max_length", truncation=True, max_length=256)


class MeanLossTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # expect: grad-accum-loss-not-scaled
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], labels=inputs["labels"])
        return (outputs.loss, outputs) if return_outputs else outputs.loss


model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"].map(encode)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, gradient_accumulation_steps=2)
MeanLossTrainer(model=model, args=args, train_dataset=data).train()
