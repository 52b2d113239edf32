"""LoRA fine-tuning that warm-starts the adapters from a previous run, on rank 0 only.

    torchrun --nproc_per_node 2 lora_rank0_warm_start.py --steps 8

The previous run's adapter (written here by the first step of the recipe) is loaded with
set_peft_model_state_dict under `if rank == 0` after the model is wrapped: DDP broadcast the
weights at construction and never again, so rank 1 keeps the fresh adapters.
"""

import argparse
import gc
import os
import tempfile

import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from tiny_llama import tiny_llama_config
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from transformers import LlamaForCausalLM


def build_model() -> torch.nn.Module:
    config = tiny_llama_config()
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    return get_peft_model(LlamaForCausalLM(config), lora)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--resume", default=os.path.join(tempfile.gettempdir(), "lora_prev.pt"))
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = build_model()
    if rank == 0 and not os.path.exists(args.resume):
        # stands in for the previous run's adapter: trained-looking, non-zero B matrices
        previous = {
            k: torch.randn_like(v) * 0.05 for k, v in get_peft_model_state_dict(model).items()
        }
        torch.save(previous, args.resume)
    model = DDP(model)

    if rank == 0:
        set_peft_model_state_dict(model.module, torch.load(args.resume))
        print(f"warm-started the adapters from {args.resume}")

    tokens = torch.randint(0, 128, (256, 16), generator=torch.Generator().manual_seed(1))
    dataset = TensorDataset(tokens)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, drop_last=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)

    sampler.set_epoch(0)
    for step, (ids,) in enumerate(loader, start=1):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0 and step % 2 == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step >= args.steps:
            break

    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
