"""Writing files and folders the user names, without ever destroying what was there.

- :func:`check_output_file` refuses an output path that names a folder, a device, a FIFO, a
  ``/proc`` or ``/sys`` entry, a file in a missing folder, or an existing file (unless
  ``force``): one :class:`~ddpadvisor.errors.InputError` line, exit 2, before any work is done.
- :func:`write_output` writes through a temporary name in the same folder and renames it over
  the target, so a reader (or a crash) never sees half a file, and a refused or failed write
  leaves the old file as it was.
- :func:`claim_output_dir` takes a folder for a run's files: it creates it, or accepts an empty
  one, or a non-empty one only with ``force``; and it holds a lock file in it, so a second run
  into the same folder is refused while the first is running (``trace --out``, ``probe --out``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from types import TracebackType

from ddpadvisor.errors import InputError

LOCK_NAME = ".ddpadvisor.lock"
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


class OutputDir:
    """A folder claimed for one run's files; holds its lock until :meth:`release`."""

    def __init__(self, path: Path, created: bool, lock_fd: int) -> None:
        self.path = path
        self.created = created
        self._lock_fd: int | None = lock_fd

    def release(self) -> None:
        if self._lock_fd is None:
            return
        import fcntl

        fd, self._lock_fd = self._lock_fd, None
        with contextlib.suppress(OSError):
            os.unlink(self.path / LOCK_NAME)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def claim_output_dir(path: Path, *, force: bool = False) -> OutputDir:
    """Create or take ``path`` for a run's output, locked against a second run.

    Refused (InputError, exit 2): a path that is not a folder, a non-empty folder this call did
    not create unless ``force``, a folder another run holds (its lock is taken whatever
    ``force`` says: two runs writing one folder mix their files).
    """
    import fcntl

    if _pseudo(path):
        raise InputError("a /proc, /sys or /dev entry is not an output folder", path)
    created = False
    try:
        path.mkdir(parents=True)
        created = True
    except FileExistsError:
        if not path.is_dir():
            raise InputError("exists and is not a folder", path) from None
    except OSError as exc:
        raise InputError(f"cannot create the folder: {exc.strerror}", path) from None
    lock = path / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise InputError(f"cannot write into the folder: {exc.strerror}", path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise InputError(
                "another ddpadvisor run is writing into this folder; wait for it or choose "
                "another --out",
                path,
            ) from None
        raise InputError(f"cannot lock the folder: {exc.strerror}", path) from None
    if not created and not force:
        try:
            others = [p.name for p in path.iterdir() if p.name != LOCK_NAME]
        except OSError as exc:
            others = [f"({exc.strerror})"]
        if others:
            claim = OutputDir(path, created, fd)
            claim.release()
            raise InputError(
                f"folder is not empty ({len(others)} entries); choose a new folder or pass "
                "--force to write into it",
                path,
            )
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return OutputDir(path, created, fd)
