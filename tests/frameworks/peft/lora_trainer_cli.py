"""LoRA fine-tuning of a small LLaMA with the HF Trainer; all arguments from the command line.

    torchrun --nproc_per_node 2 lora_trainer_cli.py --output_dir out --use_cpu --lora_r 8 \
        --max_steps 8 --gradient_accumulation_steps 2 --report_to none --save_strategy no
"""

from dataclasses import dataclass, field

import torch
from peft import LoraConfig, TaskType, get_peft_model
from tiny_llama import tiny_llama_config
from torch.utils.data import Dataset
from transformers import HfArgumentParser, LlamaForCausalLM, Trainer, TrainingArguments


@dataclass
class LoraArguments:
    lora_r: int = field(default=8)
    lora_alpha: int = field(default=16)
    lora_dropout: float = field(default=0.0)
    target_modules: str = field(default="q_proj,v_proj")


class InstructionData(Dataset):
    def __init__(self, n: int = 128, seq_len: int = 16, vocab: int = 128) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, vocab, (n, seq_len), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.ids[i]
        labels = ids.clone()
        labels[:4] = -100  # the prompt part is not trained on
        return {"input_ids": ids, "labels": labels}


def main() -> None:
    parser = HfArgumentParser((LoraArguments, TrainingArguments))
    lora_args, training_args = parser.parse_args_into_dataclasses()

    config = tiny_llama_config()
    model = LlamaForCausalLM(config)
    peft_config = LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=lora_args.lora_r,
        lora_alpha=lora_args.lora_alpha,
        lora_dropout=lora_args.lora_dropout,
        target_modules=lora_args.target_modules.split(","),
    )
    model = get_peft_model(model, peft_config)
    model.print_trainable_parameters()

    trainer = Trainer(model=model, args=training_args, train_dataset=InstructionData())
    trainer.train()


if __name__ == "__main__":
    main()
