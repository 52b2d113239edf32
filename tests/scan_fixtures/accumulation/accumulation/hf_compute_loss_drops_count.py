"""A Trainer subclass whose compute_loss swallows num_items_in_batch in **kwargs and returns the
micro-batch mean; the Trainer, seeing a model that takes loss kwargs, does not divide it."""
# scan-facts: grad_accum_steps=4 loss_divided_by_accum=false hand_written_loop=unknown
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from datasets import load_dataset


class LossTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):  # expect: grad-accum-loss-not-scaled
        outputs = model(input_ids=inputs["input_ids"], labels=inputs["labels"])
        return (outputs.loss, outputs) if return_outputs else outputs.loss


model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, gradient_accumulation_steps=4)
LossTrainer(model=model, args=args, train_dataset=data).train()
