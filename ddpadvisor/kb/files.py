"""Which folders make up the knowledge base and which files in them are rule files.

Kept apart from the loader so that a warm start (the KB cache) can find and stat the files
without importing YAML or validation.
"""

from __future__ import annotations

import os
from pathlib import Path

from ddpadvisor.bundled import bundled_dir


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ddpadvisor" / "kb"


# A rule folder holds tens or hundreds of files (a 10,000-cause one, a hundred); a folder
# with more entries than this is a wrong --kb (``--kb /usr`` walked 300,000 entries in 30 s).
MAX_ENTRIES = 20_000
_KERNEL = (Path("/proc"), Path("/sys"), Path("/dev"))


def kb_files(folder: Path) -> list[Path]:
    """The rule files under ``folder``; an InputError for a kernel view or a folder tree far
    larger than any rule folder (found without walking it all)."""
    from ddpadvisor.errors import InputError

    resolved = folder.resolve()
    if any(resolved == k or k in resolved.parents for k in _KERNEL):
        raise InputError("a /proc, /sys or /dev folder is not a KB folder", folder)
    found = []
    for seen, path in enumerate(folder.rglob("*"), start=1):
        if seen > MAX_ENTRIES:
            raise InputError(
                f"KB folder holds more than {MAX_ENTRIES} entries; is it a rule folder?", folder
            )
        if path.suffix in (".yaml", ".yml") and path.is_file():
            found.append(path)
    return sorted(found)


def default_dirs(extra: list[Path] | None = None, *, bundled: bool = True) -> list[Path]:
    dirs = [bundled_dir("kb")] if bundled else []
    cfg = user_config_dir()
    if bundled and cfg.is_dir() and not os.environ.get("DDPADVISOR_NO_USER_KB"):
        dirs.append(cfg)
    dirs.extend(extra or [])
    return dirs
