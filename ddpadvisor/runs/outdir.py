"""The folder a run writes into: never one that holds something, never one another run holds.

``trace --out DIR`` and ``probe --out DIR`` used to write into whatever DIR held, replacing a
previous trace's files, and two runs started into one folder both wrote there. Now:

- an explicit ``--out DIR`` must be missing or empty, unless ``--force`` (then only the files a
  run of that kind writes are replaced; anything else in DIR is left alone);
- the default folder (``ddpadvisor-trace``, ``probe-results``) is used when missing or empty;
  otherwise the first free sibling ``NAME-2``, ``NAME-3``, … is, and the command prints it;
- while a run writes, it holds an exclusive lock on ``DIR/.ddpadvisor.lock`` (``flock``: the
  kernel releases it when the process ends, however it ends); a second run into the folder is
  refused with one line, exit 2, ``--force`` or not. The lock file stays (removing it would let
  a run waiting on the old file and a new run both hold "the" lock); it is not counted as
  content.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ddpadvisor.errors import InputError

LOCK = ".ddpadvisor.lock"
MAX_SIBLINGS = 1000
BUSY = "another ddpadvisor run is writing into this folder; wait for it, or give another --out"


def _holds_something(folder: Path) -> bool:
    try:
        return any(p.name != LOCK for p in folder.iterdir())
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InputError(f"cannot read the folder: {exc.strerror or exc}", folder) from None


def choose(out: Path | None, default: Path) -> Path:
    """The folder to write: ``out`` as given, else ``default`` or its first free sibling."""
    if out is not None:
        return out
    if not _holds_something(default) and not _locked(default):
        return default
    for n in range(2, MAX_SIBLINGS):
        candidate = default.with_name(f"{default.name}-{n}")
        if not _holds_something(candidate) and not _locked(candidate):
            return candidate
    raise InputError(f"{MAX_SIBLINGS} earlier runs are here; give --out DIR", default)


def _locked(folder: Path) -> bool:
    path = folder / LOCK
    if not path.exists():
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return True
    try:
        return not _try_lock(fd)
    finally:
        os.close(fd)  # closing drops a lock this probe took


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return True  # a file system without locks: nothing more can be checked
    return True


@contextlib.contextmanager
def claimed(folder: Path, *, force: bool, what: str) -> Iterator[Path]:
    """Hold ``folder`` for one run: created if missing, refused (InputError, exit 2) when it
    holds files and ``force`` is off, or when another run holds it. The lock goes with the
    run; the lock file is removed after it."""
    if folder.exists() and not folder.is_dir():
        raise InputError("--out exists and is not a folder", folder)
    if _locked(folder):
        raise InputError(BUSY, folder)
    if not force and _holds_something(folder):
        raise InputError(
            f"--out already holds files ({what} or yours); give a new folder, or --force to "
            f"replace the {what} files in it (other files are left alone)",
            folder,
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InputError(f"cannot write the folder: {exc.strerror or exc}", folder) from None
    try:
        if not _try_lock(fd):
            raise InputError(BUSY, folder)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield folder
    finally:
        os.close(fd)  # the lock ends with it
