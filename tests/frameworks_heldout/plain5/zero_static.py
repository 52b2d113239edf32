"""Dropout MLP classifier on Gaussian clusters: DDP(static_graph=True) with a
ZeroRedundancyOptimizer sharding SGD-momentum state across the ranks, MultiStepLR with
milestones in optimizer steps, clipping, an all-reduced evaluation every 5 steps, early
stopping on the validation accuracy."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CLASSES, DIM = 6, 20


def clusters(n: int, centres: torch.Tensor, gen: torch.Generator) -> TensorDataset:
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = centres[y] + 1.3 * torch.randn(n, DIM, generator=gen)
    return TensorDataset(x, y)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    centres = torch.randn(CLASSES, DIM, generator=gen)
    train_set, val_set = clusters(320, centres, gen), clusters(96, centres, gen)

    net = nn.Sequential(
        nn.Linear(DIM, 64), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(64, CLASSES),
    )
    model = DDP(net, static_graph=True)
    opt = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.SGD, lr=0.05, momentum=0.9, nesterov=True
    )
    batch, epochs = 16, 3
    sampler = DistributedSampler(train_set, shuffle=True, seed=11)
    loader = DataLoader(train_set, batch_size=batch, sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader)
    milestones = [int(0.6 * epochs * steps_per_epoch), int(0.85 * epochs * steps_per_epoch)]  # fault zero_milestones_epochs: milestones = [int(0.6 * epochs), int(0.85 * epochs)]
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.2)
    val_loader = DataLoader(
        val_set, batch_size=32, sampler=DistributedSampler(val_set, shuffle=False)
    )

    def evaluate(model: nn.Module) -> float:
        model.eval()
        counts = torch.zeros(2)
        with torch.no_grad():
            for x, y in val_loader:
                counts += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(counts)
        model.train()
        return (counts[0] / counts[1]).item()

    step, best, patience = 0, 0.0, 0
    stop = False
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # fault zero_no_set_epoch: -
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()  # fault zero_loss_over_world: (loss / world).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
            step += 1
            shown = loss.detach().clone()
            dist.all_reduce(shown)
            if rank == 0:
                print(f"step {step} loss {shown.item() / world:.4f} lr {sched.get_last_lr()[0]:.4f}")
            if step % 5 == 0:
                acc = evaluate(model)
                if rank == 0:
                    print(f"step {step} val acc {acc:.3f}")
                if acc > best + 1e-3:
                    best, patience = acc, 0
                else:
                    patience += 1
                    stop = patience >= 3
            if stop:
                break
        if stop:
            break

    del model, opt, net
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
