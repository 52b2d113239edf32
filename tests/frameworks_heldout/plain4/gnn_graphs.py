"""Graph classification with a small GIN over random graphs, per-graph mini-batches.

Two classes of random graphs (sparse Erdos-Renyi against rings with chords), node features
from degrees plus noise. A collate function packs a batch of graphs into one disjoint graph
(node features concatenated, edge indices offset, a graph id per node); message passing uses
``index_add_`` and the readout is a mean per graph. AdamW, cosine lr per epoch, validation
accuracy from counts summed over the ranks.

    python -m torch.distributed.run --nproc_per_node 2 gnn_graphs.py
"""

from __future__ import annotations

import argparse
import gc
import itertools

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

Graph = tuple[torch.Tensor, torch.Tensor, int]  # node features, edges (2, E), label


def random_graph(gen: torch.Generator, label: int) -> Graph:
    n = int(torch.randint(6, 15, (1,), generator=gen))
    if label == 0:
        mask = torch.rand(n, n, generator=gen) < 0.18
        src, dst = torch.triu(mask, 1).nonzero(as_tuple=True)
    else:
        ring = torch.arange(n)
        chords = torch.randint(0, n, (2, max(1, n // 4)), generator=gen)
        src = torch.cat([ring, chords[0]])
        dst = torch.cat([(ring + 1) % n, chords[1]])
        keep = src != dst
        src, dst = src[keep], dst[keep]
    edges = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    degree = torch.bincount(edges[0], minlength=n).float()
    feats = torch.stack([degree / 4.0, (degree == 2).float(), torch.ones(n)], 1)
    feats = feats + 0.1 * torch.randn(n, 3, generator=gen)
    return feats, edges, label


class RandomGraphs(Dataset):
    def __init__(self, count: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.graphs = [random_graph(gen, i % 2) for i in range(count)]

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int) -> Graph:
        return self.graphs[i]


def collate(graphs: list[Graph]) -> dict[str, torch.Tensor]:
    feats, edges, owner, offset = [], [], [], 0
    for gid, (x, e, _) in enumerate(graphs):
        feats.append(x)
        edges.append(e + offset)
        owner.append(torch.full((x.shape[0],), gid, dtype=torch.long))
        offset += x.shape[0]
    return {
        "x": torch.cat(feats),
        "edges": torch.cat(edges, 1),
        "owner": torch.cat(owner),
        "y": torch.tensor([g[2] for g in graphs]),
    }


class GINLayer(nn.Module):
    def __init__(self, dim_in: int, dim_out: int) -> None:
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(dim_in, dim_out), nn.ReLU(), nn.Linear(dim_out, dim_out))
        self.norm = nn.LayerNorm(dim_out)

    def forward(self, h: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        agg = torch.zeros_like(h).index_add_(0, edges[1], h[edges[0]])
        return F.relu(self.norm(self.mlp((1 + self.eps) * h + agg)))


class GIN(nn.Module):
    def __init__(self, dim_in: int = 3, hidden: int = 32, layers: int = 3) -> None:
        super().__init__()
        dims = [dim_in] + [hidden] * layers
        self.layers = nn.ModuleList(GINLayer(a, b) for a, b in itertools.pairwise(dims))
        self.head = nn.Linear(hidden * layers, 2)

    def forward(self, x: torch.Tensor, edges: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        graphs = int(owner.max()) + 1
        counts = torch.bincount(owner, minlength=graphs).clamp(min=1).unsqueeze(1).float()
        pooled, h = [], x
        for layer in self.layers:
            h = layer(h, edges)
            pooled.append(torch.zeros(graphs, h.shape[1]).index_add_(0, owner, h) / counts)
        return self.head(torch.cat(pooled, 1))


def run_batch(net: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return net(batch["x"], batch["edges"], batch["owner"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--graphs-per-rank", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(args.seed)

    train_set, val_set = RandomGraphs(96, args.seed), RandomGraphs(32, args.seed + 1)
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = DataLoader(
        train_set, batch_size=args.graphs_per_rank, sampler=train_sampler, collate_fn=collate
    )
    val_loader = DataLoader(
        val_set,
        batch_size=args.graphs_per_rank,
        sampler=DistributedSampler(val_set, shuffle=False),
        collate_fn=collate,
    )

    model = DDP(GIN())
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)  # fault gnn_no_set_epoch: -
        model.train()
        for step, batch in enumerate(train_loader):
            logits = run_batch(model, batch)  # fault gnn_module_forward: logits = run_batch(model.module, batch)
            loss = F.cross_entropy(logits, batch["y"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.AVG)
            if rank == 0 and step % 3 == 0:
                print(f"epoch {epoch} step {step} loss {logged.item():.4f}", flush=True)
        scheduler.step()

        model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for batch in val_loader:
                pred = run_batch(model.module, batch).argmax(1)
                correct += int((pred == batch["y"]).sum())
                total += len(batch["y"])
        stats = torch.tensor([correct, total], dtype=torch.float64)  # fault gnn_val_acc_summed: stats = torch.tensor([correct / total], dtype=torch.float64)
        dist.all_reduce(stats)
        val_acc = (stats[0] / stats[1]).item()  # fault gnn_val_acc_summed: val_acc = stats[0].item()
        if rank == 0:
            print(f"epoch {epoch} val_acc {val_acc:.3f}", flush=True)

    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
