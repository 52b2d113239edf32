"""A small Trainer class: dict batches with labels, accumulation without no_sync."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class TaggingData(Dataset):
    def __init__(self, n=256, length=10, vocab=50):
        g = torch.Generator().manual_seed(27)
        self.ids = torch.randint(1, vocab, (n, length), generator=g)
        self.labels = (self.ids % 3).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class Tagger(nn.Module):
    def __init__(self, vocab=50, dim=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, input_ids, labels=None):
        logits = self.head(torch.relu(self.mix(self.emb(input_ids))))
        loss = F.cross_entropy(logits.view(-1, 3), labels.view(-1)) if labels is not None else None
        return loss, logits


class Trainer:
    def __init__(self, model, dataset, accum=2, lr=5e-3, epochs=2):
        self.sampler = DistributedSampler(dataset, shuffle=True)
        self.loader = DataLoader(dataset, batch_size=8, sampler=self.sampler)
        self.model = DDP(model)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.accum = accum
        self.epochs = epochs

    def train(self):
        for epoch in range(self.epochs):
            self.sampler.set_epoch(epoch)
            window = torch.zeros(())
            for step, batch in enumerate(self.loader):
                loss, _ = self.model(**batch)
                (loss / self.accum).backward()
                window += loss.detach() / self.accum
                if (step + 1) % self.accum == 0:
                    self.opt.step()
                    self.opt.zero_grad()
                    dist.all_reduce(window)
                    if dist.get_rank() == 0 and step % 16 == 15:
                        print(f"epoch {epoch} step {step + 1}: loss {window.item() / dist.get_world_size():.4f}")
                    window.zero_()


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(4)
    trainer = Trainer(Tagger(), TaggingData())
    trainer.train()
    del trainer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
