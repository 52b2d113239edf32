"""Writing files and folders the user names, without ever destroying what was there.

- :func:`check_output_file` refuses an output path that names a folder, a device, a FIFO, a
  ``/proc`` or ``/sys`` entry, a file in a missing folder, or an existing file (unless
  ``force``): one :class:`~ddpadvisor.errors.InputError` line, exit 2, before any work is done.
- :func:`write_output` writes through a temporary name in the same folder and renames it over
  the target, so a reader (or a crash) never sees half a file, and a refused or failed write
  leaves the old file as it was.
- A run's output folder (``trace --out``, ``probe --out``) is claimed by
  :mod:`ddpadvisor.runs.outdir`: missing or empty, or ``--force``, and locked against a second
  run.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from ddpadvisor.errors import InputError

# Kernel views, not files: writing there changes the system (or fails half-way).
_PSEUDO = (Path("/proc"), Path("/sys"), Path("/dev"))


def _pseudo(path: Path) -> bool:
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return False
    return any(resolved == p or p in resolved.parents for p in _PSEUDO)


def check_output_file(path: Path, *, force: bool = False) -> None:
    """Refuse, with one line, an output file that cannot be written without loss."""
    if _pseudo(path):
        raise InputError("a /proc, /sys or /dev entry is not an output file", path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror}", path) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError("is a folder; name the file to write", path)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("is not a regular file (a pipe or a device?); not written", path)
        if not force:
            raise InputError("already exists; pass --force to replace it", path)
    parent = path.parent
    if not parent.is_dir():
        raise InputError(f"folder {parent} does not exist", path)


def write_output(path: Path, data: str | bytes, *, force: bool = False) -> None:
    """Write ``data`` to ``path`` atomically, refusing what :func:`check_output_file` refuses."""
    check_output_file(path, force=force)
    try:
        atomic_write(path, data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as exc:  # a read-only folder, a full disk: the old file is as it was
        raise InputError(f"cannot write: {exc.strerror or exc}", path) from None


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write through a temporary file in the same folder, then rename it over ``path``.

    The new file gets ``mode``, else the replaced file's mode, else 0666 less the umask.
    Raises OSError (the caller says what it means); the temporary file never stays behind.
    """
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
