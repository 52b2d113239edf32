"""A Trainer subclass with a token-level loss over num_items_in_batch (times the processes, since
DDP averages): normalised over the whole accumulated batch, as the Trainer expects."""
# scan-facts: grad_accum_steps=4 loss_divided_by_accum=true loss_normalised_by_global_tokens=true
# scan-facts: variable_length_sequences=true
import torch.nn.functional as F
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)

from datasets import load_dataset


class TokenLossTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # ok: grad-accum-loss-not-scaled
        labels = inputs.pop("labels")
        logits = model(**inputs).logits[:, :-1]
        loss = F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten(), reduction="sum")
        loss = loss / num_items_in_batch * self.accelerator.num_processes
        return loss


model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, gradient_accumulation_steps=4)
tokenizer = AutoTokenizer.from_pretrained("gpt2")
collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
TokenLossTrainer(model=model, args=args, train_dataset=data, data_collator=collator).train()
