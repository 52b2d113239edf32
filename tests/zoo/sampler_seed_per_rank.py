"""Token classifier trainer with a small embedding-bag model."""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class BagOfTokens(Dataset):
    def __init__(self, n=320, vocab=200, length=12):
        g = torch.Generator().manual_seed(11)
        self.tokens = torch.randint(0, vocab, (n, length), generator=g)
        self.labels = (self.tokens[:, :3].sum(1) % 4).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


class Classifier(nn.Module):
    def __init__(self, vocab=200, dim=32, classes=4):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, 64), nn.Tanh(), nn.Linear(64, classes))

    def forward(self, tokens):
        return self.mlp(self.embed(tokens))


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.seed = args.seed + self.rank
        torch.manual_seed(self.seed)
        self.dataset = BagOfTokens()
        self.sampler = DistributedSampler(self.dataset, shuffle=True, seed=self.seed)  # fix: self.sampler = DistributedSampler(self.dataset, shuffle=True, seed=args.seed)
        self.loader = DataLoader(self.dataset, batch_size=args.batch_size, sampler=self.sampler)
        self.model = DDP(Classifier())
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self, epoch):
        self.sampler.set_epoch(epoch)
        self.model.train()
        stats = torch.zeros(2)
        for tokens, labels in self.loader:
            loss = self.criterion(self.model(tokens), labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            stats += torch.tensor([loss.item() * len(labels), len(labels)])
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    def fit(self):
        for epoch in range(self.args.epochs):
            loss = self.train_epoch(epoch)
            if self.rank == 0:
                print(f"[epoch {epoch}] train loss {loss:.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    trainer = Trainer(args)
    trainer.fit()
    del trainer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
