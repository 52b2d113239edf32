"""A fire entry feeding the HF Trainer a learning rate multiplied by the world size: the rate
itself is an option, the world-size factor is the code's."""
# scan-facts: lr_scaling=linear
import os

import fire
import transformers
from datasets import load_dataset
from transformers import AutoModelForCausalLM


def train(base_model: str = "gpt2", learning_rate: float = 3e-4, micro_batch_size: int = 4):
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    model = AutoModelForCausalLM.from_pretrained(base_model)
    data = load_dataset("json", data_files="data.json")["train"]
    trainer = transformers.Trainer(
        model=model,
        train_dataset=data,
        args=transformers.TrainingArguments(
            per_device_train_batch_size=micro_batch_size,
            learning_rate=learning_rate * world_size,  # expect: lr-scaled-too-aggressively
            output_dir="out",
        ),
    )
    trainer.train()


if __name__ == "__main__":
    fire.Fire(train)
