"""Causal-LM training of a tiny Llama (built from its config) with the HF Trainer on DeepSpeed
ZeRO-3: the DeepSpeed config is the JSON file beside the script, the ZeRO-3 template of the
transformers docs, every batch, accumulation, clipping, optimizer and scheduler value "auto"
(filled from TrainingArguments). Synthetic sequences that repeat a random six-token motif.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 trainer_llama_zero3.py
"""

import os
import tempfile
from pathlib import Path

import torch
from torch.utils.data import Dataset
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

DS_CONFIG = Path(__file__).resolve().with_name("ds_trainer_zero3.json")
BASE_LR = 1e-3  # tuned on one device at batch 8
PER_DEVICE_BATCH = 8
ACCUM = 2


class RepeatedMotifs(Dataset):
    def __init__(self, n=256, motif=6, repeats=4, vocab=128):
        g = torch.Generator().manual_seed(11)
        motifs = torch.randint(0, vocab, (n, motif), generator=g)
        self.ids = motifs.repeat(1, repeats)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i].clone()}


def main():
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    args = TrainingArguments(
        output_dir=os.path.join(tempfile.gettempdir(), "ddpadvisor-heldout-llama-zero3"),
        per_device_train_batch_size=PER_DEVICE_BATCH,
        gradient_accumulation_steps=ACCUM,
        learning_rate=BASE_LR,  # fault trainer_llama_lr_scaled: learning_rate=BASE_LR * world_size * ACCUM,  # linear scaling to the global batch
        weight_decay=0.01,
        warmup_steps=2,
        max_grad_norm=1.0,
        num_train_epochs=2,
        logging_steps=2,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=42,
        deepspeed=str(DS_CONFIG),
        use_cpu=True,  # no GPU here: else accelerate finds no backend
    )
    if args.process_index == 0:
        print(f"{world_size} processes, global batch {PER_DEVICE_BATCH * ACCUM * world_size}")
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    trainer = Trainer(model=model, args=args, train_dataset=RepeatedMotifs())
    trainer.train()


if __name__ == "__main__":
    main()
