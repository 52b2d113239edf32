"""Two-tower retrieval with in-batch negatives drawn from every rank.

Synthetic user-item interactions (a hidden taste vector per user and item, positives sampled
by affinity). A user tower and an item tower (id embeddings plus dense side features) map
into one normalised space; each rank scores its users against the items of the global batch
(the other ranks' item vectors gathered without gradient, its own kept with gradient), with a
per-item popularity bias as a logit correction. The id tables train with SGD, the dense layers
with AdamW; the gradients go through a hand-written mean all-reduce comm hook that counts the
bytes it sends.

    python -m torch.distributed.run --nproc_per_node 2 twotower_retrieval.py
"""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

N_USERS, N_ITEMS, SIDE = 200, 300, 8


def interactions(count: int, seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    taste_u = torch.randn(N_USERS, 6, generator=gen)
    taste_i = torch.randn(N_ITEMS, 6, generator=gen)
    side_u = torch.cat([taste_u, torch.randn(N_USERS, 2, generator=gen)], 1)
    side_i = torch.cat([taste_i, torch.randn(N_ITEMS, 2, generator=gen)], 1)
    users = torch.randint(0, N_USERS, (count,), generator=gen)
    affinity = taste_u[users] @ taste_i.T
    items = torch.multinomial(F.softmax(affinity, 1), 1, generator=gen).squeeze(1)
    return TensorDataset(users, side_u[users], items, side_i[items])


class Tower(nn.Module):
    def __init__(self, ids: int, dim: int = 32) -> None:
        super().__init__()
        self.emb = nn.Embedding(ids, dim)
        self.mlp = nn.Sequential(nn.Linear(dim + SIDE, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, ids: torch.Tensor, side: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.mlp(torch.cat([self.emb(ids), side], 1)), dim=1)


class TwoTower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.user = Tower(N_USERS)
        self.item = Tower(N_ITEMS)
        self.item_bias = nn.Embedding(N_ITEMS, 1)  # fault tt_bias_after_wrap: -
        nn.init.zeros_(self.item_bias.weight)  # fault tt_bias_after_wrap: -

    def forward(self, u, u_side, i, i_side):  # type: ignore[no-untyped-def]
        return self.user(u, u_side), self.item(i, i_side), self.item_bias(i).squeeze(1)


class HookState:
    def __init__(self) -> None:
        self.bytes_sent = 0


# no `from __future__ import annotations` in this file: DDP checks the hook's annotations
def mean_allreduce_hook(
    state: HookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer()
    state.bytes_sent += buf.numel() * buf.element_size()
    buf.div_(dist.get_world_size())  # fault tt_hook_sum: -
    work = dist.all_reduce(buf, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--emb-lr", type=float, default=0.5)
    parser.add_argument("--dense-lr", type=float, default=2e-3)
    parser.add_argument("--temperature", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    data = interactions(768, args.seed)
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler, drop_last=True)

    model = DDP(TwoTower())
    hook_state = HookState()
    model.register_comm_hook(hook_state, mean_allreduce_hook)  # fault tt_bias_after_wrap: = || model.module.item_bias = nn.Embedding(N_ITEMS, 1) || nn.init.zeros_(model.module.item_bias.weight)
    sparse = [p for n, p in model.module.named_parameters() if "emb" in n or "bias" in n]
    dense = [p for n, p in model.module.named_parameters() if not ("emb" in n or "bias" in n)]
    emb_opt = torch.optim.SGD(sparse, lr=args.emb_lr)
    dense_opt = torch.optim.AdamW(dense, lr=args.dense_lr, weight_decay=1e-4)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for u, u_side, i, i_side in loader:
            user_vec, item_vec, bias = model(u, u_side, i, i_side)
            gathered = [torch.empty_like(item_vec) for _ in range(world_size)]
            dist.all_gather(gathered, item_vec.detach())
            gathered[rank] = item_vec
            all_items = torch.cat(gathered)
            all_bias = [torch.empty_like(bias) for _ in range(world_size)]
            dist.all_gather(all_bias, bias.detach())
            all_bias[rank] = bias
            logits = user_vec @ all_items.T / args.temperature + torch.cat(all_bias)
            labels = torch.arange(len(u)) + rank * len(u)
            loss = F.cross_entropy(logits, labels)

            emb_opt.zero_grad(set_to_none=True)
            dense_opt.zero_grad(set_to_none=True)
            loss.backward()
            emb_opt.step()
            dense_opt.step()

            with torch.no_grad():
                hits = (logits.argmax(1) == labels).float().sum()
                stats = torch.stack([loss.detach() * len(u), hits, torch.tensor(float(len(u)))])
                dist.all_reduce(stats)
            if rank == 0 and step % 4 == 0:
                print(
                    f"epoch {epoch} step {step} loss {stats[0].item() / stats[2].item():.4f} "
                    f"in-batch top1 {stats[1].item() / stats[2].item():.3f}",
                    flush=True,
                )
            step += 1

    if rank == 0:
        print(f"comm hook sent {hook_state.bytes_sent} bytes", flush=True)
    del model, emb_opt, dense_opt
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
