"""Rank 1 raises at step 5."""

from _common import train


def fault(step, rank):
    if rank == 1 and step == 5:
        raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")


train(fault)
