"""Train a tiny transformer language model with accelerate in bf16 mixed precision.

Launched with ``torchrun --nproc_per_node 2 correct_bf16_transformer.py --cpu
--mixed-precision bf16``. Correct: prepare() wraps the forward in autocast and shards the
batches; the loss is the mean token cross-entropy; clipping goes through the Accelerator; the
printed loss is averaged over the processes.
"""

import argparse
import math

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, SEQ = 64, 16


class RandomTokens(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, VOCAB, (n, SEQ + 1), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.data[i, :-1], "labels": self.data[i, 1:]}


class TinyLM(nn.Module):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(SEQ, d))
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=64, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(input_ids.shape[1])
        h = self.embed(input_ids) + self.pos
        return self.head(self.encoder(h, mask=mask, is_causal=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--mixed-precision", default="bf16", choices=["no", "bf16"])
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    set_seed(0)
    loader = DataLoader(RandomTokens(128), batch_size=4, shuffle=True, drop_last=True)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = 2

    def cosine(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, step / (2 * args.steps))))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    done = 0
    while done < args.steps:
        for batch in loader:
            logits = model(batch["input_ids"])
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), batch["labels"].reshape(-1)
            )
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            done += 1
            if done % 4 == 0:
                mean_loss = accelerator.reduce(loss.detach(), reduction="mean")
                accelerator.print(f"step {done} loss {mean_loss.item():.3f}")
            if done >= args.steps:
                break

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
