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


def kb_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def default_dirs(extra: list[Path] | None = None, *, bundled: bool = True) -> list[Path]:
    dirs = [bundled_dir("kb")] if bundled else []
    cfg = user_config_dir()
    if bundled and cfg.is_dir() and not os.environ.get("DDPADVISOR_NO_USER_KB"):
        dirs.append(cfg)
    dirs.extend(extra or [])
    return dirs
