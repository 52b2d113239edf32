"""Replies padded by hand in the dataset (the tail set to PAD) and the loss told to ignore PAD:
batches hold varying numbers of targets, though no collator, mask or -100 label shows it."""
# scan-facts: variable_length_sequences=true loss_reduction=mean
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

PAD, VOCAB, MAX_LEN = 0, 64, 48


class Replies(Dataset):
    def __init__(self, lengths, tokens):
        self.lengths, self.tokens = lengths, tokens

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        ids = self.tokens[i].clone()
        ids[self.lengths[i] :] = PAD
        return ids


def main():
    dist.init_process_group("gloo")
    lengths = torch.randint(3, MAX_LEN, (256,))
    ds = Replies(lengths, torch.randint(1, VOCAB, (256, MAX_LEN)))
    loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds))
    model = DDP(nn.Sequential(nn.Embedding(VOCAB, 32), nn.Linear(32, VOCAB)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for ids in loader:
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1), ignore_index=PAD)  # ok: grad-accum-loss-not-scaled
        opt.zero_grad()
        loss.backward()  # ok: extra-backward-through-ddp
        opt.step()


main()
