"""Every rank fails inside its distributed set-up, before the agent can write a record (a
script that asks for a backend this machine lacks)."""

import torch.distributed as dist


def init_distributed() -> None:
    raise RuntimeError("Distributed package doesn't have NCCL built in (simulated)")
    dist.init_process_group("nccl")


init_distributed()
