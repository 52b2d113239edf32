"""Cache the validated KB and its compiled model between runs, as JSON (never pickle).

Parsing and validating every YAML file costs more than a diagnosis, and ``--json`` must start
fast. The cache is plain data, so a tampered file can at worst give a wrong answer, never run
code; it is also only read when this user owns it and nobody else can write it or its folder.
The key is a hash of the tool version, the cache format and every KB file's path and bytes, so
any edit to a rule invalidates it. Only problem-free KBs are cached. DDPADVISOR_NO_CACHE=1
skips it.

Each KB entry is stored as its own JSON text and validated only when first used: a diagnosis
touches a handful of the causes of a 10,000-cause rule folder, so a warm start pays for the
compiled model and those few entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from ddpadvisor import __version__
from ddpadvisor.engine.model import CompiledModel, FactTable, load_model
from ddpadvisor.engine.model import Path as GraphPath
from ddpadvisor.kb.load import kb_files, load_kb
from ddpadvisor.kb.model import KnowledgeBase, Origin
from ddpadvisor.kb.schema import Cause, Claim, Fact, Fix, Mechanism, RuleTest

FORMAT = 2
KINDS: dict[str, type[BaseModel]] = {
    "facts": Fact,
    "mechanisms": Mechanism,
    "causes": Cause,
    "fixes": Fix,
    "claims": Claim,
}

M = TypeVar("M", bound=BaseModel)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddpadvisor"


def _key(dirs: list[Path]) -> str | None:
    h = hashlib.sha256(f"{__version__}\0{FORMAT}\n".encode())
    # The code that compiles the model is part of the key: a changed model, schema or level
    # table must never load an old cache.
    for code in ("model.py", "../kb/schema.py", "../kb/levels.py", "../kb/values.py"):
        st = (Path(__file__).parent / code).stat()
        h.update(f"{code}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for folder in dirs:
        if not folder.is_dir():
            return None  # let the loader report it
        h.update(str(folder.resolve()).encode() + b"\n")
        for path in kb_files(folder):
            try:
                data = path.read_bytes()
            except OSError:
                return None
            h.update(f"{path}\0{len(data)}\0".encode())
            h.update(hashlib.sha256(data).digest())
    return h.hexdigest()[:40]


def trusted(path: Path) -> bool:
    """Owned by this user and writable by nobody else, and the same for its folder."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    for p in (path, path.parent):
        try:
            st = p.lstat()
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode):
            return False
        if uid is not None and st.st_uid != uid:
            return False
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


class LazyEntries(MutableMapping[str, M], Generic[M]):
    """A mapping id -> model that validates each stored JSON text on first access."""

    def __init__(self, model: type[M], raw: dict[str, str]) -> None:
        self._model = model
        self._raw = raw
        self._done: dict[str, M] = {}

    def __getitem__(self, key: str) -> M:
        got = self._done.get(key)
        if got is None:
            got = self._model.model_validate_json(self._raw[key])
            self._done[key] = got
        return got

    def __setitem__(self, key: str, value: M) -> None:
        self._raw[key] = ""
        self._done[key] = value

    def __delitem__(self, key: str) -> None:
        del self._raw[key]
        self._done.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, key: object) -> bool:
        return key in self._raw


def _dump(kb: KnowledgeBase, model: CompiledModel) -> dict[str, Any]:
    def text(m: BaseModel) -> str:
        return m.model_dump_json(by_alias=True, exclude_defaults=True)

    return {
        "format": FORMAT,
        "version": __version__,
        "entries": {kind: {i: text(m) for i, m in getattr(kb, kind).items()} for kind in KINDS},
        "tests": [text(t) for t in kb.tests],
        "origins": [[k, i, o.file, o.line] for (k, i), o in kb.origins.items()],
        "test_origins": [[o.file, o.line] for o in kb.test_origins],
        "aliases": kb.aliases,
        "dirs": kb.dirs,
        "model": {
            "causes": model.causes,
            "priors": model.priors,
            "gates": {str(ci): facts for ci, facts in model.gates.items()},
            "measured": sorted(model.measured),
            "setup": sorted(model.setup),
            "facts": {
                fid: {
                    "classes": t.classes,
                    "healthy": t.healthy,
                    "likelihood": {str(ci): d for ci, d in t.likelihood.items()},
                    "paths": {
                        str(ci): [[p.finding, p.mechanism, p.weight, p.explicit_p] for p in ps]
                        for ci, ps in t.paths.items()
                    },
                }
                for fid, t in model.facts.items()
            },
        },
    }


def _restore(doc: dict[str, Any]) -> tuple[KnowledgeBase, CompiledModel]:
    if doc.get("format") != FORMAT or doc.get("version") != __version__:
        raise ValueError("another cache format")
    kb = KnowledgeBase(dirs=list(doc["dirs"]))
    for kind, model_type in KINDS.items():
        setattr(kb, kind, LazyEntries(model_type, dict(doc["entries"][kind])))
    # Rule tests are only read by `kb test`, which uses them all: validate them when asked.
    kb.tests = cast(list[RuleTest], _LazyTests(doc["tests"]))
    kb.origins = {(k, i): Origin(f, ln) for k, i, f, ln in doc["origins"]}
    kb.test_origins = [Origin(f, ln) for f, ln in doc["test_origins"]]
    kb.aliases = dict(doc["aliases"])
    m = doc["model"]
    tables = {}
    for fid, t in m["facts"].items():
        table = FactTable(
            id=fid,
            classes=list(t["classes"]),
            index={c: i for i, c in enumerate(t["classes"])},
            healthy=list(t["healthy"]),
        )
        table.likelihood = {int(ci): d for ci, d in t["likelihood"].items()}
        table.paths = cast(dict[int, list[GraphPath]], _LazyPaths(t["paths"]))
        tables[fid] = table
    return kb, CompiledModel(
        causes=list(m["causes"]),
        priors=list(m["priors"]),
        facts=tables,
        gates={int(ci): list(facts) for ci, facts in m["gates"].items()},
        measured=frozenset(m["measured"]),
        setup=frozenset(m["setup"]),
    )


class _LazyPaths(dict[int, list[GraphPath]]):
    """A fact table's graph paths per cause, built when an explanation first asks for them."""

    def __init__(self, raw: dict[str, list[list[Any]]]) -> None:
        super().__init__()
        self._raw = raw

    def __missing__(self, ci: int) -> list[GraphPath]:
        rows = self._raw[str(ci)]
        built = [GraphPath(f, mech, float(w), bool(x)) for f, mech, w, x in rows]
        self[ci] = built
        return built


class _LazyTests(list[RuleTest]):
    """The rule tests, validated from their JSON texts on first use of the list."""

    def __init__(self, raw: list[str]) -> None:
        super().__init__()
        self._raw: list[str] | None = raw

    def _fill(self) -> None:
        if self._raw is not None:
            raw, self._raw = self._raw, None
            super().extend(RuleTest.model_validate_json(r) for r in raw)

    def __iter__(self) -> Iterator[RuleTest]:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def __getitem__(self, i: Any) -> Any:
        self._fill()
        return super().__getitem__(i)


def load_cached(dirs: list[Path]) -> tuple[KnowledgeBase, CompiledModel | None]:
    """The KB (and its compiled model when it loaded without problems)."""
    key = None if os.environ.get("DDPADVISOR_NO_CACHE") else _key(dirs)
    path = cache_dir() / f"kb-{key}.json" if key else None
    if path is not None and path.is_file() and trusted(path):
        try:
            with path.open("rb") as fh:
                return _restore(json.load(fh))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a stale or broken cache is rebuilt below
    kb = load_kb(dirs)
    if kb.problems:
        return kb, None
    model = load_model(kb)
    if path is not None:
        _write(path, _dump(kb, model))
    return kb, model


def _write(path: Path, doc: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, ensure_ascii=False, separators=(",", ":"))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home is fine: just slower
