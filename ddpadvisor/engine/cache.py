"""Cache the validated KB and its compiled model between runs.

Parsing and validating every YAML file costs more than a diagnosis, and ``--json`` must start
fast. The cache key covers the tool version and every KB file's path, size and mtime, so any
edit to a rule invalidates it. Only problem-free KBs are cached. DDPADVISOR_NO_CACHE=1 skips it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from ddpadvisor import __version__
from ddpadvisor.engine.model import CompiledModel, load_model
from ddpadvisor.kb.load import kb_files, load_kb
from ddpadvisor.kb.model import KnowledgeBase


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddpadvisor"


def _key(dirs: list[Path]) -> str | None:
    h = hashlib.sha256(__version__.encode())
    # The code that builds the pickled objects is part of the key: a changed model or schema
    # must never load an old pickle.
    for code in ("model.py", "../kb/schema.py"):
        st = (Path(__file__).parent / code).stat()
        h.update(f"{code}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for folder in dirs:
        if not folder.is_dir():
            return None  # let the loader report it
        h.update(str(folder.resolve()).encode())
        for path in kb_files(folder):
            st = path.stat()
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


def load_cached(dirs: list[Path]) -> tuple[KnowledgeBase, CompiledModel | None]:
    """The KB (and its compiled model when it loaded without problems)."""
    key = None if os.environ.get("DDPADVISOR_NO_CACHE") else _key(dirs)
    path = cache_dir() / f"kb-{key}.pickle" if key else None
    if path is not None and path.is_file():
        try:
            with path.open("rb") as fh:
                kb, model = pickle.load(fh)
            return kb, model
        except Exception:
            pass  # a stale or broken cache is rebuilt below
    kb = load_kb(dirs)
    if kb.problems:
        return kb, None
    model = load_model(kb)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump((kb, model), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home is fine: just slower
    return kb, model
