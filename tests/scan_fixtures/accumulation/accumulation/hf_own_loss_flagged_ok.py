"""A Trainer subclass with its own per-batch mean loss that tells the Trainer so
(model_accepts_loss_kwargs = False), as TRL's trainers do: the Trainer divides it over the
accumulation steps."""
# scan-facts: grad_accum_steps=8 loss_divided_by_accum=true
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from datasets import load_dataset


class MeanLossTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.model_accepts_loss_kwargs = False

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):  # ok: grad-accum-loss-not-scaled
        outputs = model(input_ids=inputs["input_ids"], labels=inputs["labels"])
        return (outputs.loss, outputs) if return_outputs else outputs.loss


model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=1, gradient_accumulation_steps=8)
MeanLossTrainer(model=model, args=args, train_dataset=data).train()
