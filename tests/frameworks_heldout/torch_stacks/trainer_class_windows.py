"""A minGPT-flavoured Trainer class around DDP: random windows from a token stream.

Seeds are fixed up front so that runs are reproducible.
"""

import gc
import os
import random
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class TrainerConfig:
    max_iters: int = 6
    batch_size: int = 8
    block_size: int = 12
    learning_rate: float = 6e-4
    grad_norm_clip: float = 1.0
    seed: int = 3407


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=48, block=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, block, dim))
        layer = nn.TransformerEncoderLayer(
            dim, 4, 2 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(block))

    def forward(self, idx, targets=None):
        T = idx.size(1)
        h = self.enc(self.tok(idx) + self.pos[:, :T], mask=self.causal[:T, :T], is_causal=True)
        logits = self.head(h)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class Trainer:
    def __init__(self, config, model, data):
        self.config = config
        self.data = data
        self.rank = int(os.environ["RANK"])
        self.model = DDP(model)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.learning_rate, betas=(0.9, 0.95)
        )
        self.iter_num = 0

    def sample_batch(self):
        c = self.config
        starts = torch.randint(0, len(self.data) - c.block_size - 1, (c.batch_size,))
        x = torch.stack([self.data[s : s + c.block_size] for s in starts])
        y = torch.stack([self.data[s + 1 : s + 1 + c.block_size] for s in starts])
        return x, y

    def run(self):
        self.model.train()
        while self.iter_num < self.config.max_iters:
            x, y = self.sample_batch()
            _, loss = self.model(x, y)
            self.model.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
            self.optimizer.step()
            self.iter_num += 1
            if self.rank == 0:
                print(f"iter {self.iter_num} train loss {loss.item():.5f}")


def main():
    dist.init_process_group("gloo")
    cfg = TrainerConfig()
    set_seed(cfg.seed)
    data = torch.randint(0, 50, (5000,), generator=torch.Generator().manual_seed(0))
    trainer = Trainer(cfg, TinyLM(block=cfg.block_size), data)
    trainer.run()
    del trainer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
