"""Wide & deep click-through model on synthetic impression logs (2 ranks, gloo)."""

import gc
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@dataclass
class Config:
    n_users: int = 200
    n_items: int = 120
    n_categories: int = 12
    n_dense: int = 6
    emb_dim: int = 16
    hidden: tuple = (64, 32)
    n_train: int = 512
    n_val: int = 128
    batch_size: int = 32
    epochs: int = 3
    lr: float = 2e-3
    weight_decay: float = 1e-5
    seed: int = 7


def make_logs(cfg, n, generator):
    users = torch.randint(cfg.n_users, (n,), generator=generator)
    items = torch.randint(cfg.n_items, (n,), generator=generator)
    cats = torch.randint(cfg.n_categories, (n,), generator=generator)
    dense = torch.randn(n, cfg.n_dense, generator=generator)
    truth = torch.Generator().manual_seed(cfg.seed + 1)
    user_bias = torch.randn(cfg.n_users, generator=truth)
    item_bias = torch.randn(cfg.n_items, generator=truth)
    w = torch.randn(cfg.n_dense, generator=truth) * 0.5
    logit = user_bias[users] + item_bias[items] + dense @ w - 0.5
    clicks = torch.bernoulli(torch.sigmoid(logit), generator=generator)
    # impressions shown lower on the page count less
    weight = 1.0 / (1.0 + torch.randint(4, (n,), generator=generator).float())
    return TensorDataset(users, items, cats, dense, clicks, weight)


class WideAndDeep(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.user = nn.Embedding(cfg.n_users, cfg.emb_dim)
        self.item = nn.Embedding(cfg.n_items, cfg.emb_dim)
        self.cat = nn.Embedding(cfg.n_categories, cfg.emb_dim // 2)
        self.wide_user = nn.Embedding(cfg.n_users, 1)
        self.wide_item = nn.Embedding(cfg.n_items, 1)
        layers, width = [], 2 * cfg.emb_dim + cfg.emb_dim // 2 + cfg.n_dense
        for h in cfg.hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(0.1)]
            width = h
        layers.append(nn.Linear(width, 1))
        self.deep = nn.Sequential(*layers)

    def forward(self, users, items, cats, dense):
        deep_in = torch.cat([self.user(users), self.item(items), self.cat(cats), dense], dim=-1)
        wide = self.wide_user(users) + self.wide_item(items)
        return (self.deep(deep_in) + wide).squeeze(-1)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64)
    correct = torch.zeros((), dtype=torch.float64)
    count = torch.zeros((), dtype=torch.float64)
    for users, items, cats, dense, clicks, _ in loader:
        logits = model(users, items, cats, dense)
        loss_sum += F.binary_cross_entropy_with_logits(logits, clicks, reduction="sum").double()
        correct += ((logits > 0).float() == clicks).sum().double()
        count += clicks.numel()
    for t in (loss_sum, correct, count):  # fault recsys_val_count_local: for t in (loss_sum, correct):
        dist.all_reduce(t)
    model.train()
    return (loss_sum / count).item(), (correct / count).item()


def main():
    cfg = Config()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(cfg.seed + rank)

    g = torch.Generator().manual_seed(cfg.seed)
    train_set = make_logs(cfg, cfg.n_train, g)
    val_set = make_logs(cfg, cfg.n_val, g)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=cfg.seed)  # fault recsys_no_sampler: -
    val_sampler = DistributedSampler(val_set, shuffle=False)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, sampler=train_sampler, drop_last=True)  # fault recsys_no_sampler: train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=64, sampler=val_sampler)

    model = DDP(WideAndDeep(cfg))
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=0)

    for epoch in range(cfg.epochs):
        train_sampler.set_epoch(epoch)  # fault recsys_no_sampler: -
        running, seen = 0.0, 0
        for users, items, cats, dense, clicks, weight in train_loader:
            logits = model(users, items, cats, dense)
            per_row = F.binary_cross_entropy_with_logits(logits, clicks, reduction="none")
            loss = (per_row * weight).sum() / cfg.batch_size
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            running += loss.item()
            seen += 1
        train_loss = torch.tensor([running, seen], dtype=torch.float64)
        dist.all_reduce(train_loss)
        val_loss, val_acc = evaluate(model, val_loader)
        plateau.step(val_loss)
        if rank == 0:
            print(
                f"epoch {epoch} train_loss {(train_loss[0] / train_loss[1]).item():.4f} "
                f"val_logloss {val_loss:.4f} val_acc {val_acc:.3f} "
                f"lr {optimizer.param_groups[0]['lr']:.2e}"
            )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
