"""A tiny GPT (hand-written attention, minGPT style) pretrained on a DeepSpeed engine, ZeRO
stage 3. The config is the JSON file beside the script, read through DeepSpeed's own command-line
arguments (--deepspeed_config); DeepSpeed's AdamW and WarmupDecayLR, two micro-batches per
optimizer step. The dataset is handed to deepspeed.initialize (training_data=...), so the loader
is DeepSpeed's (a DistributedSampler per data-parallel rank); one pass over it. Synthetic token
sequences: arithmetic progressions modulo the vocabulary.

    DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 gpt_zero3.py --deepspeed_config gpt_zero3.json
"""

import argparse
import os

import deepspeed
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset


class Progressions(Dataset):
    def __init__(self, n=512, block_size=32, vocab_size=97):
        g = torch.Generator().manual_seed(2024)
        start = torch.randint(0, vocab_size, (n, 1), generator=g)
        stride = torch.randint(1, 8, (n, 1), generator=g)
        self.tokens = (start + stride * torch.arange(block_size + 1)) % vocab_size

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        seq = self.tokens[i]
        return seq[:-1], seq[1:]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=97, block_size=32, n_layer=2, n_head=4, n_embd=64):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def get_args():
    parser = argparse.ArgumentParser(description="tiny GPT on DeepSpeed ZeRO-3")
    parser.add_argument("--local_rank", type=int, default=-1)
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()
    if args.deepspeed_config is None:
        args.deepspeed_config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt_zero3.json")
    return args


def main():
    args = get_args()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(1337)
    model = GPT()
    engine, _, train_loader, lr_scheduler = deepspeed.initialize(
        args=args, model=model, model_parameters=model.parameters(), training_data=Progressions()
    )
    gas = engine.gradient_accumulation_steps()
    world = dist.get_world_size()

    window = torch.zeros(1)  # fault gpt_zero3_rank0_log: -
    for it, (idx, targets) in enumerate(train_loader):
        loss = engine(idx, targets)
        engine.backward(loss)
        engine.step()
        window += loss.detach() / gas  # fault gpt_zero3_rank0_log: -
        if (it + 1) % gas == 0:  # fault gpt_zero3_rank0_log: if engine.global_rank == 0:
            dist.all_reduce(window)  # fault gpt_zero3_rank0_log: print(f"iter {it}: loss {loss.item():.4f}, lr {lr_scheduler.get_last_lr()[0]:.2e}")
            if engine.global_rank == 0:  # fault gpt_zero3_rank0_log: -
                print(f"step {engine.global_steps}: loss {window.item() / world:.4f}, lr {lr_scheduler.get_last_lr()[0]:.2e}")  # fault gpt_zero3_rank0_log: -
            window.zero_()  # fault gpt_zero3_rank0_log: -


if __name__ == "__main__":
    main()
