"""Rank 1 stops making progress at step 5 (as in a dead-locked data loader)."""

import time

from _common import train


def fault(step, rank):
    if rank == 1 and step == 5:
        time.sleep(3600)


train(fault)
