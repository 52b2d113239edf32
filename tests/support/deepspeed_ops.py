"""DeepSpeed's CPU ops for the DeepSpeed zoo (tests/frameworks/deepspeed), built once (tests only).

A DeepSpeed job on the CPU JIT-compiles two C++ ops the first time it runs: the shared-memory
collective its comm layer reduces gradients with, and ``fused_adam`` (its AdamW). That takes
about 3.5 minutes on CI's 2 cores; once built they sit in ``TORCH_EXTENSIONS_DIR`` and every
later job loads them in a second. ``.ci/run`` starts ``python tests/support/deepspeed_ops.py``
in the background before pytest, so the build overlaps the rest of the suite; the DeepSpeed
tests call :func:`wait` before their first launch (and build the ops themselves, through the
first job, when no build was started).

Where: ``$TORCH_EXTENSIONS_DIR`` when set, else ``<venv>/torch_extensions`` (inside the CI
venv, never the user's ``~/.cache``). The build writes ``.building`` (its pid) there while it
runs, then ``.ready`` or ``.failed`` (with the error).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

OPS = ("ShareMemCommBuilder", "FusedAdamBuilder")


def extensions_dir() -> Path:
    """Where the ops are built and looked up (the environment's value, else in the venv)."""
    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path(sys.prefix) / "torch_extensions")


def job_env() -> dict[str, str]:
    """What a DeepSpeed job needs on top of the zoo's environment: the CPU accelerator and the
    ops' folder."""
    return {"DS_ACCELERATOR": "cpu", "TORCH_EXTENSIONS_DIR": str(extensions_dir())}


def build() -> int:
    """Build (or load) both ops; 0 when they load, 1 otherwise (``.failed`` says why)."""
    folder = extensions_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for name in (".ready", ".failed"):
        (folder / name).unlink(missing_ok=True)
    (folder / ".building").write_text(str(os.getpid()))
    os.environ.update(job_env())
    started = time.monotonic()
    try:
        from deepspeed.ops.op_builder import cpu

        for name in OPS:
            getattr(cpu, name)().load(verbose=False)
    except Exception:
        (folder / ".failed").write_text(traceback.format_exc())
        return 1
    finally:
        (folder / ".building").unlink(missing_ok=True)
    (folder / ".ready").write_text(f"{time.monotonic() - started:.0f} s\n")
    return 0


def _alive(pid_file: Path) -> bool:
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def wait(timeout: float = 900.0) -> str:
    """Wait while a build started by ``.ci/run`` runs; say how it ended ('ready', 'failed:
    ...', or 'not built': the first job builds the ops itself)."""
    folder = extensions_dir()
    deadline = time.monotonic() + timeout
    while (folder / ".building").exists() and _alive(folder / ".building"):
        if time.monotonic() > deadline:
            return "still building"
        time.sleep(2)
    if (folder / ".ready").exists():
        return "ready"
    if (folder / ".failed").exists():
        return "failed: " + (folder / ".failed").read_text().strip().splitlines()[-1]
    return "not built"


if __name__ == "__main__":
    sys.exit(build())
