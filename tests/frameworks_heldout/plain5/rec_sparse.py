"""Implicit-feedback recommender with sparse embedding tables (sparse=True): SparseAdam for
the tables, Adam for the dense scorer, item tables warm-started from vectors rank 0 saves
and every rank loads before the wrap, BPR loss with sampled negatives, hit-rate eval."""

import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

USERS, ITEMS, D = 64, 96, 16


class Recommender(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.user = nn.Embedding(USERS, D, sparse=True)
        self.item = nn.Embedding(ITEMS, D, sparse=True)
        self.score = nn.Sequential(nn.Linear(3 * D, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        u, v = self.user(users), self.item(items)
        return self.score(torch.cat([u, v, u * v], dim=-1)).squeeze(-1)


def interactions(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    taste = torch.randint(0, 4, (USERS,), generator=gen)
    rows = []
    for u in range(USERS):
        liked = torch.randint(0, ITEMS // 4, (6,), generator=gen) * 4 + taste[u]
        rows += [(u, int(i)) for i in liked]
    return torch.tensor(rows), taste


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    pairs, taste = interactions(torch.Generator().manual_seed(5))

    ckpt_dir = tempfile.gettempdir()
    job = os.environ.get("TORCHELASTIC_RUN_ID", "local")
    path = os.path.join(ckpt_dir, f"rec_item_vectors_{job}.pt")
    if rank == 0:
        torch.save({"weight": torch.randn(ITEMS, D) * 0.1}, path)
    dist.barrier()

    net = Recommender()
    net.item.load_state_dict(torch.load(path))  # fault rec_warm_rank0: -
    model = DDP(net)  # fault rec_warm_rank0: = || if rank == 0: || >model.module.item.load_state_dict(torch.load(path))
    dist.barrier()
    if rank == 0:
        os.remove(path)

    sparse_params = list(net.user.parameters()) + list(net.item.parameters())
    sparse_opt = torch.optim.SparseAdam(sparse_params, lr=1e-2)
    dense_opt = torch.optim.Adam(net.score.parameters(), lr=3e-3)

    train_set = TensorDataset(pairs[:, 0], pairs[:, 1])
    sampler = DistributedSampler(train_set, shuffle=True, seed=1)
    loader = DataLoader(train_set, batch_size=24, sampler=sampler, drop_last=True)
    neg_gen = torch.Generator().manual_seed(200 + rank)

    for epoch in range(3):
        sampler.set_epoch(epoch)
        model.train()
        for users, items in loader:
            negs = torch.randint(0, ITEMS, items.shape, generator=neg_gen)
            pos = model(users, items)
            neg = model(users, negs)
            loss = -F.logsigmoid(pos - neg).mean()
            sparse_opt.zero_grad()
            dense_opt.zero_grad()
            loss.backward()
            sparse_opt.step()
            dense_opt.step()
            shown = loss.detach().clone()
            dist.all_reduce(shown)
            if rank == 0:
                print(f"epoch {epoch} bpr {shown.item() / world:.4f}")

        model.eval()
        with torch.no_grad():
            my_users = torch.arange(rank, USERS, world)
            scores = model.module(
                my_users.repeat_interleave(ITEMS), torch.arange(ITEMS).repeat(len(my_users))
            ).view(len(my_users), ITEMS)
            best = scores.argmax(dim=1)
            hits = (best % 4 == taste[my_users]).float()
            taste_hits = torch.stack([hits.sum(), torch.tensor(float(len(hits)))])
        dist.all_reduce(taste_hits)
        if rank == 0:
            print(f"epoch {epoch} top-1 residue match {(taste_hits[0] / taste_hits[1]).item():.3f}")

    del model, net
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
