"""HF Trainer + peft: LoRA (r=4 on c_attn) on a tiny random GPT-2 learning repeated token
motifs; a TrainerCallback sets the adapters' B matrices to a small recipe init when training
begins; 2 micro-batches per optimizer step, 10 steps, on CPU."""

import tempfile

import torch
from peft import LoraConfig, get_peft_model
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


class Motifs(Dataset):
    def __init__(self, n: int = 160, length: int = 20, vocab: int = 80) -> None:
        g = torch.Generator().manual_seed(3)
        motif = torch.randint(0, vocab, (n, 5), generator=g)
        self.ids = motif.repeat(1, length // 5)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i].clone()}


class LoraBInit(TrainerCallback):
    """Start the adapters from small non-zero B matrices (a fixed draw, the same everywhere)."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        g = torch.Generator().manual_seed(11)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:  # fault lora_b_rank0: if "lora_B" in name and state.is_world_process_zero:
                    p.copy_(0.01 * torch.randn(p.shape, generator=g))


def main() -> None:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=80, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="lora_gpt2_"),
        use_cpu=True,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_steps=10,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        logging_steps=2,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Motifs(), callbacks=[LoraBInit()])
    trainer.train()


if __name__ == "__main__":
    main()
