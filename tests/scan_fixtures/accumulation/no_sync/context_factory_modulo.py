"""An executor picks the context for each micro-step by a modulo test and enters it by
calling the chosen factory: the bound ``model.no_sync`` on the micro-steps before the
boundary, ``nullcontext`` on the boundary. Clipping runs only on the boundary."""
# scan-facts: uses_no_sync=true final_micro_step_synced=true clip_inside_no_sync=false
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
            if (batch_idx + 1) % self.accum != 0:
                context = model.no_sync
            else:
                context = nullcontext
            with context():  # ok: no-sync-misaligned
                pred = model(x)
                loss = F.mse_loss(pred, torch.zeros_like(pred)) / self.accum
                loss.backward()
            if (batch_idx + 1) % self.accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # ok: clip-on-local-grads
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
