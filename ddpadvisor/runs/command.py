"""The torchrun command line: ``python -m torch.distributed.run`` and nothing home-made.

torchrun runs as its own module (``runpy``, as ``python -m`` does) under a three-line prelude
that ends the process with ``os._exit`` once torchrun's ``main`` has returned or raised (its
report printed, its workers gone): Python's own finalization of a process that imported torch
takes 0.4-0.6 s on a quiet 2-core machine (2.3 s under load) and frees nothing anyone needs.
The exit status is the one torchrun would have had.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# How often torchrun checks its workers; a dead worker is seen this fast.
MONITOR_INTERVAL_S = 0.1

# ``python -c FAST_EXIT -m MODULE ARGS…``: run MODULE as ``python -m MODULE ARGS…`` would, then
# exit at once with its status (SystemExit's code; 1 and the traceback for an exception).
FAST_EXIT = (
    "import os,runpy,sys,traceback\n"
    "mod=sys.argv[2];sys.argv=[mod,*sys.argv[3:]];code=0\n"
    "try:runpy.run_module(mod,run_name='__main__',alter_sys=True)\n"
    "except SystemExit as e:\n"
    " code=e.code if isinstance(e.code,int) else 0 if e.code is None else 1\n"
    " if not isinstance(e.code,(int,type(None))):print(e.code,file=sys.stderr)\n"
    "except BaseException:traceback.print_exc();code=1\n"
    "for s in(sys.stdout,sys.stderr):\n"
    " try:s.flush()\n"
    " except Exception:pass\n"
    "os._exit(code)\n"
)


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
    cmd = [python, "-c", FAST_EXIT, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
    if nnodes > 1 or rdzv_endpoint:
        cmd += ["--nnodes", str(nnodes), "--rdzv_backend", "c10d"]
        cmd += ["--rdzv_endpoint", rdzv_endpoint or "127.0.0.1:29400", "--rdzv_id", rdzv_id]
        if node_rank is not None:
            cmd += ["--node_rank", str(node_rank)]
    else:
        cmd += ["--standalone"]
    cmd += ["--max_restarts", "0", "--monitor_interval", f"{MONITOR_INTERVAL_S:g}"]
    return cmd + list(target)
