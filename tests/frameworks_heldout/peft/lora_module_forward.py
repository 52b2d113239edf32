"""PEFT LoRA causal-LM fine-tune with a hand-written DDP loop.

PeftModel.forward takes HF keyword arguments, so the loop calls the underlying PeftModel
directly to pass them through.
"""

import argparse
import gc
import math
import os

import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from transformers import GPT2Config, GPT2LMHeadModel, get_linear_schedule_with_warmup


class Chunks(Dataset):
    def __init__(self, n, block, vocab):
        g = torch.Generator().manual_seed(11)
        self.data = torch.randint(0, vocab, (n, block), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch-size", type=int, default=4)
    return ap.parse_args()


def main():
    args = parse()
    dist.init_process_group(backend="gloo")
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(1)

    base = GPT2LMHeadModel(
        GPT2Config(
            n_layer=2,
            n_head=2,
            n_embd=32,
            vocab_size=80,
            n_positions=16,
            bos_token_id=0,
            eos_token_id=0,
        )
    )
    peft_model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True)
    )
    ddp_model = DistributedDataParallel(peft_model)

    ds = Chunks(64, 16, 80)
    dl = DataLoader(
        ds, batch_size=args.batch_size, sampler=DistributedSampler(ds, world_size, rank)
    )
    optimizer = torch.optim.AdamW(
        (p for p in ddp_model.parameters() if p.requires_grad), lr=args.lr
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, 1, args.max_steps)

    ddp_model.train()
    done = 0
    for epoch in range(math.ceil(args.max_steps / len(dl)) + 1):
        dl.sampler.set_epoch(epoch)
        for batch in dl:
            outputs = ddp_model.module(input_ids=batch, labels=batch)
            loss = outputs.loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            done += 1
            if rank == 0:
                print(f"epoch {epoch} step {done} loss {loss.item():.3f}")
            if done == args.max_steps:
                break
        if done == args.max_steps:
            break

    del ddp_model, peft_model, base, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
