"""An overriding compute_loss over batches the scan cannot see into (no labels key anywhere):
whether the Trainer counts tokens, and so whether it divides, is not decided."""
# scan-facts: grad_accum_steps=4 loss_divided_by_accum=unknown
import torch.nn.functional as F
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

from datasets import load_dataset


class PairTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):  # ok: grad-accum-loss-not-scaled
        target = inputs.pop("target")
        logits = model(**inputs).logits
        loss = F.cross_entropy(logits, target)
        return (loss, logits) if return_outputs else loss


model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
data = load_dataset("json", data_files="pairs.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, gradient_accumulation_steps=4)
PairTrainer(model=model, args=args, train_dataset=data).train()
