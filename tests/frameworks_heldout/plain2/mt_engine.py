"""Training / evaluation helpers shared by the multi-task job (reference-script style)."""

import time
from collections import defaultdict

import torch
import torch.distributed as dist
import torch.nn.functional as F


class MeterBank:
    """Running sums of named values; ``synchronize`` adds them up over all processes."""

    def __init__(self):
        self.sums = defaultdict(float)
        self.counts = defaultdict(int)

    def update(self, n=1, **values):
        for k, v in values.items():
            self.sums[k] += float(v) * n
            self.counts[k] += n

    def synchronize(self):
        keys = sorted(self.sums)
        t = torch.tensor([[self.sums[k], self.counts[k]] for k in keys], dtype=torch.float64)
        dist.all_reduce(t)
        for k, (s, c) in zip(keys, t.tolist()):
            self.sums[k], self.counts[k] = s, int(c)

    def averages(self):
        return {k: self.sums[k] / max(1, self.counts[k]) for k in self.sums}

    def __str__(self):
        return "  ".join(f"{k}: {v:.4f}" for k, v in sorted(self.averages().items()))


def multitask_loss(outputs, price, segment, price_weight):
    price_loss = F.smooth_l1_loss(outputs["price"].squeeze(-1), price)
    segment_loss = F.cross_entropy(outputs["segment"], segment)
    return segment_loss + price_weight * price_loss, price_loss, segment_loss


def train_one_epoch(model, optimizer, data_loader, epoch, args, lr_scheduler=None):
    model.train()
    meters = MeterBank()
    start = time.time()
    for step, (features, price, segment) in enumerate(data_loader):
        outputs = model(features)
        loss, price_loss, segment_loss = multitask_loss(outputs, price, segment, args.price_weight)
        optimizer.zero_grad()
        loss.backward()
        if args.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        optimizer.step()
        if lr_scheduler is not None:
            lr_scheduler.step()
        n = features.shape[0]
        meters.update(
            n=n, loss=loss.item(), price_l1=price_loss.item(), segment_ce=segment_loss.item()
        )
        if step % args.print_freq == 0 and dist.get_rank() == 0:
            print(
                f"Epoch [{epoch}] [{step}/{len(data_loader)}] lr {optimizer.param_groups[0]['lr']:.5f}"
            )
    meters.synchronize()
    if dist.get_rank() == 0:
        print(f"Epoch [{epoch}] train  {meters}  ({time.time() - start:.2f}s)")
    return meters.averages()


@torch.no_grad()
def evaluate(model, data_loader, args):
    model.eval()
    meters = MeterBank()
    for features, price, segment in data_loader:
        outputs = model(features)
        loss, price_loss, _ = multitask_loss(outputs, price, segment, args.price_weight)
        acc = (outputs["segment"].argmax(-1) == segment).float().mean()
        meters.update(
            n=features.shape[0],
            loss=loss.item(),
            price_l1=price_loss.item(),
            segment_acc=acc.item(),
        )
    meters.synchronize()
    if dist.get_rank() == 0:
        print(f"        eval   {meters}")
    return meters.averages()
