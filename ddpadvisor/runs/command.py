"""The torchrun command line: ``python -m torch.distributed.run`` and nothing home-made."""

from __future__ import annotations

import sys
from collections.abc import Sequence

# How often torchrun checks its workers; a dead worker is seen this fast.
MONITOR_INTERVAL_S = 0.1


def torchrun_command(
    target: Sequence[str],
    *,
    nproc: int,
    python: str = sys.executable,
    nnodes: int = 1,
    node_rank: int | None = None,
    rdzv_endpoint: str | None = None,
    rdzv_id: str = "ddpadvisor",
) -> list[str]:
    """``python -m torch.distributed.run … TARGET``; TARGET is ``script args…`` or ``-m mod …``.

    One node without an endpoint runs ``--standalone``; otherwise the nodes meet through c10d
    rendezvous at ``rdzv_endpoint``. Failed workers are never restarted.
    """
    cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
    if nnodes > 1 or rdzv_endpoint:
        cmd += ["--nnodes", str(nnodes), "--rdzv_backend", "c10d"]
        cmd += ["--rdzv_endpoint", rdzv_endpoint or "127.0.0.1:29400", "--rdzv_id", rdzv_id]
        if node_rank is not None:
            cmd += ["--node_rank", str(node_rank)]
    else:
        cmd += ["--standalone"]
    cmd += ["--max_restarts", "0", "--monitor_interval", f"{MONITOR_INTERVAL_S:g}"]
    return cmd + list(target)
