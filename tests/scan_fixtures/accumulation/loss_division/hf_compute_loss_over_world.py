"""A Trainer subclass that divides the Trainer's own loss by the number of processes, believing
DDP sums the gradients of the ranks: DDP averages them, so every step is W times too small."""
# scan-facts: loss_divided_by_world_size=true loss_multiplied_by_world_size=false
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

from datasets import load_dataset


class SFTTrainerWithWorld(Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        loss = super().compute_loss(model, inputs, *args, **kwargs)
        return loss / self.accelerator.num_processes  # expect: loss-divided-by-world-size


tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4)
SFTTrainerWithWorld(model=model, args=args, train_dataset=data).train()
