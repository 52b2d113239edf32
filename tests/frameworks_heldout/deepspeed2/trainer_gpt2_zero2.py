"""Fine-tuning a tiny GPT-2 on padded variable-length sequences with the HF Trainer and a
DeepSpeed ZeRO-2 JSON config (every size, the optimizer and the schedule left to "auto")."""

import os

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed

HERE = os.path.dirname(os.path.abspath(__file__))
PAD = 0


class PaddedSequences(Dataset):
    """Arithmetic-progression token runs of random length, right-padded to a fixed width."""

    def __init__(self, n=256, width=32, vocab=128, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(6, width + 1, (), generator=g))
            start = int(torch.randint(1, vocab, (), generator=g))
            stride = int(torch.randint(1, 4, (), generator=g))
            ids = torch.full((width,), PAD)
            ids[:length] = (start + stride * torch.arange(length)) % (vocab - 1) + 1
            mask = (torch.arange(width) < length).long()
            labels = ids.masked_fill(mask == 0, -100)
            self.items.append({"input_ids": ids, "attention_mask": mask, "labels": labels})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def main():
    set_seed(7)
    config = GPT2Config(
        vocab_size=128,
        n_positions=32,
        n_embd=64,
        n_layer=2,
        n_head=4,
        pad_token_id=PAD,
        bos_token_id=1,
        eos_token_id=1,
    )
    model = GPT2LMHeadModel(config)

    args = TrainingArguments(
        output_dir=os.environ.get("OUTPUT_DIR", "/tmp/trainer_gpt2_zero2"),
        deepspeed=os.path.join(HERE, "ds_trainer_zero2.json"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_steps=6,
        learning_rate=1e-3,
        weight_decay=0.01,
        warmup_steps=2,
        max_grad_norm=1.0,
        bf16=True,
        use_cpu=True,
        logging_steps=1,  # fault trainer_gpt2_local_tokens: = || average_tokens_across_devices=False,
        save_strategy="no",
        report_to="none",
        dataloader_drop_last=True,
        seed=7,
    )
    trainer = Trainer(model=model, args=args, train_dataset=PaddedSequences())
    trainer.train()


if __name__ == "__main__":
    main()
