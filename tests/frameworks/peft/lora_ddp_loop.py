"""LoRA fine-tuning in a hand-written DDP loop, done right.

    torchrun --nproc_per_node 2 lora_ddp_loop.py --steps 8 --accum 2

Adapters are injected before the model is wrapped, every rank reads its own shard, the loss is
divided by the accumulation steps and gradients sync only on the last micro-batch.
"""

import argparse
import contextlib
import gc
import os

import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from tiny_llama import tiny_llama_config
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from transformers import LlamaForCausalLM


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)

    config = tiny_llama_config()
    model = LlamaForCausalLM(config)
    model = get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    )
    model = DDP(model)

    tokens = torch.randint(0, 128, (256, 16), generator=torch.Generator().manual_seed(1))
    dataset = TensorDataset(tokens)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)

    step = 0
    epoch = 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for i, (ids,) in enumerate(loader):
            last = (i + 1) % args.accum == 0
            ctx = contextlib.nullcontext() if last else model.no_sync()
            with ctx:
                loss = model(input_ids=ids, labels=ids).loss / args.accum
                loss.backward()
            if not last:
                continue
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % 2 == 0:
                logged = loss.detach() * args.accum
                dist.all_reduce(logged, op=dist.ReduceOp.AVG)
                if rank == 0:
                    print(f"step {step} loss {logged.item():.4f}")
            if step >= args.steps:
                break
        epoch += 1

    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
