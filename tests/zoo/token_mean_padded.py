"""Small causal LM fine-tuned on chat-style replies: mostly short, some long, padded per batch."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

PAD, VOCAB, MAX_LEN = 0, 64, 48


class Replies(Dataset):
    def __init__(self, n=256):
        g = torch.Generator().manual_seed(17)
        short = torch.randint(3, 9, (n,), generator=g)
        long = torch.randint(MAX_LEN // 2, MAX_LEN + 1, (n,), generator=g)
        self.lengths = torch.where(torch.rand(n, generator=g) < 0.3, long, short)
        self.tokens = torch.randint(1, VOCAB, (n, MAX_LEN), generator=g)

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        ids = self.tokens[i].clone()
        ids[self.lengths[i] :] = PAD
        return ids


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, ids):
        hidden, _ = self.rnn(self.embed(ids))
        return self.head(hidden)


def main():
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(0)
    ds = Replies()
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=2, sampler=sampler)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, ids in enumerate(loader):
            logits = model(ids[:, :-1])
            labels = ids[:, 1:]
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=PAD)  # fix: kept = (labels != PAD).sum() || dist.all_reduce(kept) || summed = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=PAD, reduction="sum") || loss = summed / kept * world
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i >= 20:
                break
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {mean.item() / world:.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
