"""Causal-LM pretraining with the HF Trainer on DeepSpeed ZeRO-2: the DeepSpeed config is a dict
passed as TrainingArguments(deepspeed=...), its batch, accumulation, clipping and optimizer
values left to the Trainer ("auto"). Random tokens, a tiny GPT-2 built from its config.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 trainer_zero2.py
"""

import os
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

DS_CONFIG = {
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "optimizer": {
        "type": "AdamW",
        "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
    },
    "zero_optimization": {"stage": 2},  # fault trainer_zero3: "zero_optimization": {"stage": 3},
}


class RandomTokens(Dataset):
    def __init__(self, n=256, seq_len=16, vocab=128):
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, vocab, (n, seq_len), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return {"input_ids": self.data[i], "labels": self.data[i].clone()}


def main():
    args = TrainingArguments(
        output_dir=os.path.join(tempfile.gettempdir(), "ddpadvisor-frameworks-trainer-zero2"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        learning_rate=5e-4,
        max_grad_norm=1.0,
        max_steps=8,
        logging_steps=2,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        deepspeed=DS_CONFIG,
        use_cpu=True,  # else accelerate finds no backend on a CPU and every rank reads all data
    )
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=16)
    model = GPT2LMHeadModel(config)
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens())
    trainer.train()


if __name__ == "__main__":
    main()
