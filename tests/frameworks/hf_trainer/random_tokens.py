"""The synthetic causal-LM data the GPT-2 Trainer jobs here train on: random token ids,
the labels a copy of them (the model shifts them)."""

import torch
from torch.utils.data import Dataset


class RandomTokens(Dataset):
    def __init__(self, n: int = 256, seq_len: int = 16, vocab: int = 128) -> None:
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, vocab, (n, seq_len), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.data[i], "labels": self.data[i].clone()}
