"""Rank 1 is killed (SIGKILL, as by the OOM killer) at step 5."""

import os
import signal

from _common import train


def fault(step, rank):
    if rank == 1 and step == 5:
        os.kill(os.getpid(), signal.SIGKILL)


train(fault)
