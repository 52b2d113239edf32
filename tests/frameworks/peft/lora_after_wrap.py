"""LoRA adapters added to a model that is already wrapped in DDP.

    torchrun --nproc_per_node 2 lora_after_wrap.py --steps 8

The base model is wrapped first (a shared setup helper), then get_peft_model injects the
adapters into model.module. DDP registered its parameters at construction, so the adapters are
never all-reduced and every rank trains its own.
"""

import argparse
import gc

import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from tiny_llama import tiny_llama_config
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from transformers import LlamaForCausalLM


def setup_model() -> DDP:
    config = tiny_llama_config()
    return DDP(LlamaForCausalLM(config), find_unused_parameters=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = setup_model()
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    get_peft_model(model.module, lora)

    tokens = torch.randint(0, 128, (256, 16), generator=torch.Generator().manual_seed(1))
    dataset = TensorDataset(tokens)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, drop_last=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)

    sampler.set_epoch(0)
    for step, (ids,) in enumerate(loader, start=1):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step >= args.steps:
            break

    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
