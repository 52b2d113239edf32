"""peft + accelerate: LoRA adapters (r=8 on q/v projections) on a tiny random Llama causal LM,
learning to continue an arithmetic token sequence. Adapters are added before prepare; AdamW on
the trainable parameters only, 12 optimizer steps."""

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import set_seed
from peft import LoraConfig, get_peft_model
from torch.utils.data import DataLoader, Dataset
from transformers import LlamaConfig, LlamaForCausalLM


class Ramps(Dataset):
    def __init__(self, n: int = 192, length: int = 24, vocab: int = 96) -> None:
        g = torch.Generator().manual_seed(2)
        start = torch.randint(0, vocab, (n, 1), generator=g)
        stride = torch.randint(1, 4, (n, 1), generator=g)
        self.ids = (start + stride * torch.arange(length)) % vocab

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i].clone()}


def main() -> None:
    PartialState(cpu=True)
    accelerator = Accelerator(cpu=True)  # fault lora_after_prepare: from accelerate import DistributedDataParallelKwargs || accelerator = Accelerator(cpu=True, kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    set_seed(0)
    config = LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0, task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)  # fault lora_after_prepare: -
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3)  # fault lora_after_prepare: -
    loader = DataLoader(Ramps(), batch_size=8, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)  # fault lora_after_prepare: model, loader = accelerator.prepare(model, loader) || get_peft_model(accelerator.unwrap_model(model), lora) || optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3)
    model.train()
    for step, batch in enumerate(loader):
        loss = model(**batch).loss
        accelerator.backward(loss)  # fault lora_loss_over_world: accelerator.backward(loss / accelerator.num_processes)
        optimizer.step()
        optimizer.zero_grad()
        if step % 4 == 0:
            mean = accelerator.gather(loss.detach()).mean()
            accelerator.print(f"step {step} loss {mean.item():.4f}")
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
