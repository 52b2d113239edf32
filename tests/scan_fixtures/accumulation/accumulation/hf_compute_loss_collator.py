"""An overriding compute_loss that calls model(**inputs): the language-modeling collator puts the
labels in the batch, so the Trainer counts tokens, passes num_items_in_batch and never divides
the mean that comes back."""
# scan-facts: grad_accum_steps=16 loss_divided_by_accum=false
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)

from datasets import load_dataset


class MyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):  # expect: grad-accum-loss-not-scaled
        outputs = model(**inputs)
        return (outputs.loss, outputs) if return_outputs else outputs.loss


tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2")
data = load_dataset("json", data_files="train.jsonl")["train"]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=1, gradient_accumulation_steps=16)
collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
MyTrainer(model=model, args=args, train_dataset=data, data_collator=collator).train()
