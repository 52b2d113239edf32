"""Text classification with FGM adversarial training (perturb the embedding matrix along its
gradient, second forward/backward on the perturbed embeddings, restore, step).

    torchrun --nproc_per_node 2 fgm_textcls.py
"""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

VOCAB = 200
SEQ_LEN = 20
POSITIVE = set(range(10, 30))
NEGATIVE = set(range(30, 50))


class SentimentToy(Dataset):
    """Label 1 when the sentence holds more 'positive' than 'negative' word ids."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(1, VOCAB, (n, SEQ_LEN), generator=g)
        pos = sum((self.tokens == t).sum(1) for t in POSITIVE)
        neg = sum((self.tokens == t).sum(1) for t in NEGATIVE)
        self.labels = (pos > neg).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.tokens[idx], self.labels[idx]


class TextCNN(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32, n_filters=32, n_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.convs = nn.ModuleList([nn.Conv1d(dim, n_filters, k) for k in (2, 3, 4)])
        self.fc = nn.Linear(3 * n_filters, n_classes)

    def forward(self, tokens):
        x = self.embedding(tokens).transpose(1, 2)
        feats = [torch.relu(conv(x)).max(dim=-1).values for conv in self.convs]
        return self.fc(torch.cat(feats, dim=1))


class FGM:
    def __init__(self, model, emb_name="embedding", epsilon=0.5):
        self.model = model
        self.emb_name = emb_name
        self.epsilon = epsilon
        self.backup = {}

    def attack(self):
        for name, param in self.model.named_parameters():
            if param.requires_grad and self.emb_name in name and param.grad is not None:
                self.backup[name] = param.data.clone()
                norm = torch.norm(param.grad)
                if norm != 0 and not torch.isnan(norm):
                    param.data.add_(self.epsilon * param.grad / norm)

    def restore(self):
        for name, param in self.model.named_parameters():
            if name in self.backup:
                param.data = self.backup[name]
        self.backup = {}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--fgm_epsilon", type=float, default=0.5)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    torch.manual_seed(2024)

    train_set = SentimentToy(384, seed=0)
    sampler = DistributedSampler(train_set, shuffle=True, seed=2024)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = DDP(TextCNN())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    fgm = FGM(model, epsilon=args.fgm_epsilon)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for tokens, labels in loader:
            with model.no_sync():  # fault fgm_double_sync: -
                logits = model(tokens)  # fault fgm_double_sync: <=
                loss = criterion(logits, labels)  # fault fgm_double_sync: <=
                loss.backward()  # fault fgm_double_sync: <=

            fgm.attack()
            loss_adv = criterion(model(tokens), labels)
            loss_adv.backward()
            fgm.restore()

            optimizer.step()
            optimizer.zero_grad()
            step += 1

            acc = (logits.argmax(-1) == labels).float().mean()
            log = torch.stack([loss.detach(), loss_adv.detach(), acc])
            dist.all_reduce(log)
            log /= world_size
            if rank == 0:
                print(
                    f"epoch {epoch} step {step} loss {log[0]:.4f} adv_loss {log[1]:.4f} acc {log[2]:.3f}"
                )

    del model, fgm
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
