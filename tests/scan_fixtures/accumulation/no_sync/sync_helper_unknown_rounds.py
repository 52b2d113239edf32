"""A sync helper enters no_sync() unless told to sync, and the loop asks it to sync on the
last accumulation round only; the number of rounds is the total batch over the per-GPU
limit, which the run's config may leave equal (one round, no no_sync ever). Whether no_sync
runs is the run's, while the last round always syncs."""
# scan-facts: uses_no_sync=unknown final_micro_step_synced=true
import contextlib
import json
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


@contextlib.contextmanager
def maybe_sync(module, sync):
    if sync or not isinstance(module, DDP):
        yield
    else:
        with module.no_sync():
            yield


def training_loop(batch_size=512, batch_gpu=None, steps=1000):
    dist.init_process_group("gloo")
    per_rank = batch_size // dist.get_world_size()
    if batch_gpu is None or batch_gpu > per_rank:
        batch_gpu = per_rank
    rounds = per_rank // batch_gpu
    model = DDP(ToyNet())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        for round_idx in range(rounds):
            with maybe_sync(model, round_idx == rounds - 1):  # ok: no-sync-misaligned
                loss = model(torch.randn(batch_gpu, 16)).pow(2).sum()
                loss.mul(1 / per_rank).backward()
        optimizer.step()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        training_loop(**json.load(f))
