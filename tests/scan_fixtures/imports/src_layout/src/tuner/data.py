import torch
from torch.utils.data import Dataset


class TokenBlocks(Dataset):
    def __init__(self, n):
        self.ids = torch.randint(0, 1000, (n, 33))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i, :-1], "labels": self.ids[i, 1:]}
