import os

import torch
import torch.distributed as dist
from torch.utils.data import Dataset

# A floor in dB for empty boxes' scores: a float, not an ignore index for labels.
SCORE_FLOOR_DB = -100.0


class RandomBoxes(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 4)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.x[i]


def init_distributed_mode(args):
    args.rank = int(os.environ["RANK"])
    args.gpu = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(args.gpu)
    dist.init_process_group(backend="nccl")


def is_main_process():
    return dist.get_rank() == 0


def clip(model, max_norm):
    if max_norm > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def collate_captions(tokenizer, texts):
    """Never called on the training path of this detector: its padding says nothing about it."""
    return tokenizer(texts, padding="longest", return_tensors="pt")["attention_mask"]
