"""Top-1 mixture-of-experts classifier under DDP with find_unused_parameters=True.

A softmax router sends each sample to one of eight experts (a Switch-style load-balancing
term keeps them busy), so an expert can go unused on a rank in a step. The job checkpoints at
the end of every epoch; after the first it is restarted the way a preempted job is, building
the model again and resuming model, optimizer and schedule from the checkpoint on every rank.

Launch: torchrun --nproc_per_node 2 moe_unused.py
"""

from __future__ import annotations

import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

IN_DIM, CLASSES, EXPERTS, REGIONS = 16, 6, 8, 4
EPOCHS = 3


def make_data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(REGIONS, IN_DIM, generator=g) * 3
    teachers = torch.randn(REGIONS, IN_DIM, CLASSES, generator=g)
    which = torch.randint(0, REGIONS, (n,), generator=g)
    x = centers[which] + torch.randn(n, IN_DIM, generator=g)
    # each region of input space is labelled by its own linear teacher
    y = torch.einsum("nd,ndc->nc", x, teachers[which]).argmax(dim=1)
    return TensorDataset(x, y)


class Expert(nn.Module):
    def __init__(self, hidden: int = 48) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN_DIM, hidden), nn.ReLU(), nn.Linear(hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class MoEClassifier(nn.Module):
    def __init__(self, hidden: int = 48) -> None:
        super().__init__()
        self.router = nn.Linear(IN_DIM, EXPERTS)
        self.experts = nn.ModuleList(Expert(hidden) for _ in range(EXPERTS))
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x: torch.Tensor):
        probs = F.softmax(self.router(x), dim=-1)
        gate, choice = probs.max(dim=-1)
        hidden = x.new_zeros(x.shape[0], self.head.in_features)
        for e, expert in enumerate(self.experts):
            picked = choice == e
            if picked.any():
                hidden[picked] = gate[picked, None] * expert(x[picked])
        # Switch Transformer balance term: fraction routed times mean router probability
        frac = F.one_hot(choice, EXPERTS).float().mean(dim=0)
        balance = EXPERTS * (frac * probs.mean(dim=0)).sum()
        return self.head(hidden), balance


def run(first_epoch: int, ckpt_path: str, rank: int) -> None:
    torch.manual_seed(1234 + rank)  # a fresh start; DDP broadcasts rank 0's weights when it wraps
    train = make_data(1536, seed=8)
    sampler = DistributedSampler(train, shuffle=True, seed=4)  # fault moe_no_sampler: -
    loader = DataLoader(train, batch_size=32, sampler=sampler)  # fmt: skip  # fault moe_no_sampler: loader = DataLoader(train, batch_size=32, shuffle=True)

    model = DDP(MoEClassifier(), find_unused_parameters=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=EPOCHS * len(loader))

    if first_epoch > 0:
        state = torch.load(ckpt_path, map_location="cpu", weights_only=True)  # fmt: skip  # fault moe_rank0_resume: if rank == 0: || >=
        model.module.load_state_dict(state["model"])  # fault moe_rank0_resume: >=
        opt.load_state_dict(state["opt"])  # fault moe_rank0_resume: >=
        sched.load_state_dict(state["sched"])  # fault moe_rank0_resume: >=

    for epoch in range(first_epoch, EPOCHS):
        sampler.set_epoch(epoch)  # fault moe_no_sampler: -
        model.train()
        meter = torch.zeros(3)
        for x, y in loader:
            logits, balance = model(x)
            task = F.cross_entropy(logits, y)
            loss = task + 0.01 * balance
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            meter += torch.tensor(
                [task.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)]
            )
        dist.all_reduce(meter)
        if rank == 0:
            print(
                f"epoch {epoch} CE {meter[0].item() / meter[2].item():.4f} "
                f"acc {meter[1].item() / meter[2].item():.3f} lr {sched.get_last_lr()[0]:.2e}",
                flush=True,
            )
            torch.save(
                {
                    "model": model.module.state_dict(),
                    "opt": opt.state_dict(),
                    "sched": sched.state_dict(),
                },
                ckpt_path,
            )
        dist.barrier()
        if epoch == 0 and first_epoch == 0:
            break  # the job is preempted here and restarted from the checkpoint

    del model
    gc.collect()


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    box = [tempfile.mkdtemp(prefix="moe-ckpt-") if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    ckpt_path = os.path.join(box[0], "last.pt")

    run(0, ckpt_path, rank)
    run(1, ckpt_path, rank)

    dist.barrier()
    if rank == 0:
        os.remove(ckpt_path)
        os.rmdir(box[0])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
