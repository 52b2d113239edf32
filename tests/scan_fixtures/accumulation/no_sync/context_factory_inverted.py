"""The executor's context factory picked the wrong way round: the bound ``model.no_sync``
on the boundary micro-step, so the step before optimizer.step() never synchronises."""
# scan-facts: uses_no_sync=true final_micro_step_synced=false clip_inside_no_sync=true
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

ACCUM = 4


class Executor:
    def __init__(self, accum):
        self.accum = accum

    def train(self, model, optimizer, batches):
        for batch_idx, x in enumerate(batches):
            if (batch_idx + 1) % self.accum == 0:
                context = model.no_sync
            else:
                context = nullcontext
            with context():  # expect: no-sync-misaligned
                pred = model(x)
                loss = F.mse_loss(pred, torch.zeros_like(pred)) / self.accum
                loss.backward()
            if (batch_idx + 1) % self.accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()


def main():
    dist.init_process_group("gloo")
    model = DDP(ToyNet())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [torch.randn(8, 16) for _ in range(100)]
    Executor(ACCUM).train(model, optimizer, batches)


if __name__ == "__main__":
    main()
