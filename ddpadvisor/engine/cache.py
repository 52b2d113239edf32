"""Cache the validated KB and its compiled model between runs, as JSON lines (never pickle).

Parsing and validating every YAML file costs more than a diagnosis, and ``--json`` must start
fast. The cache is plain data, so a tampered file can at worst give a wrong answer, never run
code; it is also only read when this user owns it and nobody else can write it or its folder.
Only problem-free KBs are cached. DDPADVISOR_NO_CACHE=1 skips it.

The file is named after the KB folders and a stamp of every rule file (path, size, mtime,
ctime, inode) and of the code that compiles the model, so a warm start reads no rule file:
any edit changes the ctime at least. A file changed within ``RACY_S`` seconds before the cache
was built could be changed again without moving its stamp on a coarse clock (git's "racily
clean" case); the cache keeps the SHA-256 of such files and checks it on every read.

Layout: the first line is a JSON header (the compiled model, the KB's ids and where each
entry's text lies); every following line is one entry's JSON text. A warm start decodes the
header and validates only the entries the diagnosis uses (the causes shown, their fixes, the
facts and claims), so a 10,000-cause rule folder costs little more than the bundled KB.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from ddpadvisor import __version__
from ddpadvisor.engine.model import CompiledModel, FactTable, RowGroups, load_model
from ddpadvisor.engine.model import Path as GraphPath
from ddpadvisor.kb.files import kb_files
from ddpadvisor.kb.model import CATCH_ALL, KnowledgeBase, Origin
from ddpadvisor.kb.schema import CHECKED, Cause, Claim, Fact, Fix, Mechanism, RuleTest

# Bumped whenever compiling a KB gives other tables for the same files (4: the catch-all's
# symptom rows mix in a typical catalogued cause; 5: the header holds the SHA-256 of the
# entry lines), so a warm cache is not read as current.
FORMAT = 8
KINDS: dict[str, type[BaseModel]] = {
    "facts": Fact,
    "mechanisms": Mechanism,
    "causes": Cause,
    "fixes": Fix,
    "claims": Claim,
}
# A rule file whose mtime or ctime is this close to the cache's build is checked by content.
RACY_S = 2.0
# The code that compiles the model is part of the stamp: a changed model, schema or level table
# must never load an old cache.
CODE = ("model.py", "../kb/schema.py", "../kb/levels.py", "../kb/values.py", "cache.py")

M = TypeVar("M", bound=BaseModel)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddpadvisor"


def _stamp(st: os.stat_result) -> list[int]:
    """What changes when a file's bytes do (ctime moves on every write and cannot be set)."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Stamp:
    """The KB folders' rule files as found now: the cache file's name and the racy files."""

    def __init__(self, dirs: list[Path]) -> None:
        self.now_ns = time.time_ns()
        h = hashlib.sha256(f"{__version__}\0{FORMAT}\n".encode())
        for code in CODE:
            st = (Path(__file__).parent / code).stat()
            h.update(f"{code}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        folders = hashlib.sha256()
        self.files: list[tuple[Path, os.stat_result]] = []
        for folder in dirs:
            if not folder.is_dir():
                raise FileNotFoundError(folder)  # let the loader report it
            name = str(folder.resolve())
            folders.update(name.encode() + b"\n")
            h.update(name.encode() + b"\n")
            for path in kb_files(folder):
                st = path.stat()
                self.files.append((path, st))
                h.update(f"{path}\0{_stamp(st)}\n".encode())
        self.name = f"kb-{folders.hexdigest()[:16]}-{h.hexdigest()[:32]}.json"
        self.prefix = self.name[: len("kb-") + 16]

    def racy_files(self) -> list[Path]:
        """The files changed too close to now for their stamps to be trusted."""
        edge = self.now_ns - int(RACY_S * 1e9)
        return [p for p, st in self.files if max(st.st_mtime_ns, st.st_ctime_ns) >= edge]

    def racy(self) -> dict[str, str]:
        """SHA-256 of each racy file."""
        return {str(p): _digest(p) for p in self.racy_files()}


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


class _Texts:
    """The cache file's entry lines, sliced out on demand."""

    def __init__(self, data: bytes, base: int) -> None:
        self._data = data
        self._base = base

    def span(self, at: list[int], k: int) -> bytes:
        """Text ``k`` of a run of lines whose start offsets are ``at`` (one past the end last)."""
        return self._data[self._base + at[k] : self._base + at[k + 1] - 1]

    def lines(self, start: int, end: int) -> list[bytes]:
        chunk = self._data[self._base + start : self._base + end]
        return chunk.splitlines()


class LazyEntries(MutableMapping[str, M], Generic[M]):
    """A mapping id -> model that validates each stored JSON text on first access."""

    def __init__(self, model: type[M], ids: list[str], at: list[int], texts: _Texts) -> None:
        self._model = model
        self._at = at
        self._texts = texts
        self._where: dict[str, int | None] = dict(zip(ids, range(len(ids))))
        self._done: dict[str, M] = {}

    def __getitem__(self, key: str) -> M:
        got = self._done.get(key)
        if got is None:
            k = self._where[key]
            if k is None:
                raise KeyError(key)
            got = self._model.model_validate_json(self._texts.span(self._at, k), context=CHECKED)
            self._done[key] = got
        return got

    def __setitem__(self, key: str, value: M) -> None:
        self._where.setdefault(key, None)
        self._done[key] = value

    def __delitem__(self, key: str) -> None:
        del self._where[key]
        self._done.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where


class _LazyOrigins(MutableMapping[tuple[str, str], Origin]):
    """Where each entry was defined, decoded when first asked (``kb test`` warnings, errors)."""

    def __init__(self, fill: Callable[[], dict[tuple[str, str], Origin]]) -> None:
        self._fill = fill
        self._data: dict[tuple[str, str], Origin] | None = None

    def _get(self) -> dict[tuple[str, str], Origin]:
        if self._data is None:
            self._data = self._fill()
        return self._data

    def __getitem__(self, key: tuple[str, str]) -> Origin:
        return self._get()[key]

    def __setitem__(self, key: tuple[str, str], value: Origin) -> None:
        self._get()[key] = value

    def __delitem__(self, key: tuple[str, str]) -> None:
        del self._get()[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


class _LazyList(list[Any]):
    """A list filled on first use (the rule tests and their origins: only ``kb test``)."""

    def __init__(self, fill: Callable[[], list[Any]]) -> None:
        super().__init__()
        self._fill_with: Callable[[], list[Any]] | None = fill

    def _fill(self) -> None:
        if self._fill_with is not None:
            fill, self._fill_with = self._fill_with, None
            super().extend(fill())

    def __iter__(self) -> Iterator[Any]:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def __getitem__(self, i: Any) -> Any:
        self._fill()
        return super().__getitem__(i)

    def append(self, item: Any) -> None:
        self._fill()
        super().append(item)

    def __contains__(self, item: object) -> bool:
        self._fill()
        return super().__contains__(item)

    def __eq__(self, other: object) -> bool:
        self._fill()
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class _LazyPaths(dict[int, list[GraphPath]]):
    """A fact table's graph paths per cause, decoded when an explanation first asks for them."""

    def __init__(self, linked: list[int], texts: _Texts, span: list[int]) -> None:
        super().__init__()
        self._linked = linked
        self._texts = texts
        self._span = span
        self._rows: dict[int, list[list[Any]]] | None = None

    def __missing__(self, ci: int) -> list[GraphPath]:
        if self._rows is None:
            raw = json.loads(self._texts.span(self._span, 0))
            self._rows = dict(zip(self._linked, raw))
        built = [GraphPath(f, mech, float(w), bool(x)) for f, mech, w, x in self._rows[ci]]
        self[ci] = built
        return built


class _Writer:
    """Collects entry lines and the offsets the header records for them."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, text: str) -> int:
        data = text.encode() + b"\n"
        start = self.size
        self.parts.append(data)
        self.size += len(data)
        return start

    def run(self, texts: list[str]) -> list[int]:
        """Offsets of ``texts`` written as consecutive lines, plus the end."""
        at = [self.add(t) for t in texts]
        return [*at, self.size]


def _dump(kb: KnowledgeBase, model: CompiledModel, racy: dict[str, str]) -> bytes:
    def text(m: BaseModel) -> str:
        return m.model_dump_json(by_alias=True, exclude_defaults=True)

    def plain(obj: Any) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    out = _Writer()
    entries = {}
    for kind in KINDS:
        table = getattr(kb, kind)
        entries[kind] = {"ids": list(table), "at": out.run([text(m) for m in table.values()])}
    files = sorted({o.file for o in kb.origins.values()} | {o.file for o in kb.test_origins})
    file_no = {f: i for i, f in enumerate(files)}
    origins = out.run(
        [
            plain(
                {
                    "files": files,
                    "entries": [
                        [k, i, file_no[o.file], o.line] for (k, i), o in kb.origins.items()
                    ],
                    "tests": [[file_no[o.file], o.line] for o in kb.test_origins],
                }
            )
        ]
    )
    tests = out.run([text(t) for t in kb.tests])
    facts = {}
    for fid, t in model.facts.items():
        groups = model.row_groups(fid)
        linked = list(t.likelihood)
        paths = [
            [[p.finding, p.mechanism, p.weight, p.explicit_p] for p in t.paths[ci]] for ci in linked
        ]
        facts[fid] = {
            "classes": t.classes,
            "healthy": t.healthy,
            "rows": groups.rows,
            "linked": linked,
            "row": [groups.of[ci] for ci in linked],
            "paths": out.run([plain(paths)]),
        }
    header = {
        "format": FORMAT,
        "version": __version__,
        "racy": racy,
        "dirs": kb.dirs,
        "aliases": kb.aliases,
        "entries": entries,
        "origins": origins,
        "tests": [tests[0], tests[-1]],
        "model": {
            # The compiled causes are the KB's in order plus the catch-all: stored once.
            "causes": None if model.causes == [*kb.causes, CATCH_ALL] else model.causes,
            "priors": model.priors,
            "gates": model.gate_groups,
            "measured": sorted(model.measured),
            "setup": sorted(model.setup),
            "display": sorted(model.display),
            "symptoms": sorted(model.symptoms),
            "configuration": sorted(model.configuration),
            "parent": model.parent,
            "facts": facts,
        },
    }
    body = b"".join(out.parts)
    header["body"] = hashlib.sha256(body).hexdigest()
    return plain(header).encode() + b"\n" + body


# A cache bigger than this is not read (nor written): a 10,000-cause rule folder makes ~60 MB.
MAX_CACHE_BYTES = 512 * 1024 * 1024


class Damaged(ValueError):
    """A cache file that does not hold what this code wrote: discarded and rebuilt."""


class Stale(ValueError):
    """A cache of another format or version, or whose racy rule file changed: rebuilt."""


def _finite_probabilities(xs: Any, *, open_low: bool = False) -> bool:
    if not isinstance(xs, list):
        return False
    for x in xs:
        if type(x) is not float and type(x) is not int:
            return False
        if not (x > 0.0 if open_low else x >= 0.0) or not x <= 1.0:  # NaN fails both
            return False
    return True


def _ints(xs: Any, below: int) -> bool:
    return isinstance(xs, list) and all(type(x) is int and 0 <= x < below for x in xs)


def _offsets(at: Any, size: int) -> bool:
    """Line start offsets, one past the end last: ascending and inside the body."""
    if not isinstance(at, list) or not at or not _ints(at, size + 1):
        return False
    return all(a <= b for a, b in itertools.pairwise(at))


def _strings(xs: Any) -> bool:
    return isinstance(xs, list) and all(isinstance(x, str) for x in xs)


def _check(doc: Any, body: bytes) -> None:
    """Raise :class:`Damaged` unless the header is one this code wrote for this body.

    The body's SHA-256 covers every entry line (a file cut off mid-write, an edited or
    oversized entry); the header's tables are checked for what the engine relies on: finite
    probabilities, non-empty class lists aligned with their rows, indices in range."""
    if not isinstance(doc, dict):
        raise Damaged("the header is not an object")
    if doc.get("format") != FORMAT or doc.get("version") != __version__:
        raise Stale("another cache format")
    if doc.get("body") != hashlib.sha256(body).hexdigest():
        raise Damaged("its entries do not match their checksum")
    size = len(body)
    racy, entries, m = doc.get("racy"), doc.get("entries"), doc.get("model")
    if not isinstance(racy, dict) or not all(isinstance(v, str) for v in racy.values()):
        raise Damaged("bad racy table")
    if not _strings(doc.get("dirs")) or not isinstance(doc.get("aliases"), dict):
        raise Damaged("bad folders or aliases")
    if not isinstance(entries, dict) or not isinstance(m, dict):
        raise Damaged("no entries or model")
    for kind in KINDS:
        got = entries.get(kind)
        if not isinstance(got, dict) or not _strings(got.get("ids")):
            raise Damaged(f"bad {kind} ids")
        if not _offsets(got.get("at"), size) or len(got["at"]) != len(got["ids"]) + 1:
            raise Damaged(f"bad {kind} offsets")
    for key in ("origins", "tests"):
        if not _offsets(doc.get(key), size) or len(doc[key]) != 2:
            raise Damaged(f"bad {key} offsets")
    causes = m.get("causes")
    if causes is None:
        causes = [*entries["causes"]["ids"], CATCH_ALL]
    if not _strings(causes) or not causes:
        raise Damaged("bad cause list")
    n = len(causes)
    if not _finite_probabilities(m.get("priors"), open_low=True) or len(m["priors"]) != n:
        raise Damaged("priors are not probabilities, one per cause")
    gates = m.get("gates")
    if not isinstance(gates, list) or not all(
        isinstance(g, list) and len(g) == 2 and _strings(g[0]) and _ints(g[1], n) for g in gates
    ):
        raise Damaged("bad gates")
    if not _strings(m.get("measured")) or not _strings(m.get("setup")):
        raise Damaged("bad measured or setup facts")
    if not _ints(m.get("display"), n) or not _strings(m.get("symptoms")):
        raise Damaged("bad display causes or symptom facts")
    if not _strings(m.get("configuration")):
        raise Damaged("bad configuration facts")
    parent = m.get("parent")
    public = len(entries["causes"]["ids"]) + 1
    if not _ints(parent, public) or (parent and (len(parent) != n or parent[-1] != public - 1)):
        raise Damaged("bad cause modes")
    facts = m.get("facts")
    if not isinstance(facts, dict):
        raise Damaged("no fact tables")
    for fid, t in facts.items():
        if not isinstance(t, dict):
            raise Damaged(f"fact {fid}: not a table")
        classes, rows = t.get("classes"), t.get("rows")
        if not _strings(classes) or not classes or len(set(classes)) != len(classes):
            raise Damaged(f"fact {fid}: bad class list")
        k = len(classes)
        if not _finite_probabilities(t.get("healthy")) or len(t["healthy"]) != k:
            raise Damaged(f"fact {fid}: bad healthy distribution")
        if not isinstance(rows, list) or not all(
            _finite_probabilities(r) and len(r) == k for r in rows
        ):
            raise Damaged(f"fact {fid}: bad likelihood rows")
        linked, row = t.get("linked") or [], t.get("row") or []
        if not (_ints(linked, n) and _ints(row, len(rows))) or len(row) != len(linked):
            raise Damaged(f"fact {fid}: bad links")
        if not _offsets(t.get("paths"), size) or len(t["paths"]) != 2:
            raise Damaged(f"fact {fid}: bad path offsets")


def _restore(data: bytes) -> tuple[KnowledgeBase, CompiledModel, list[str]]:
    """The KB and model, and the racy files whose content was checked."""
    end = data.find(b"\n")
    if end < 0:
        raise Damaged("cut off in its header")
    try:
        doc = json.loads(data[:end])
    except ValueError:
        raise Damaged("its header is not JSON") from None
    _check(doc, data[end + 1 :])
    for name, digest in doc["racy"].items():
        try:
            if _digest(Path(name)) != digest:
                raise Stale("a rule file changed without changing its stamp")
        except OSError:
            raise Stale("a rule file is gone") from None
    texts = _Texts(data, end + 1)
    kb = KnowledgeBase(dirs=list(doc["dirs"]))
    for kind, model_type in KINDS.items():
        got = doc["entries"][kind]
        setattr(kb, kind, LazyEntries(model_type, got["ids"], got["at"], texts))
    span = doc["origins"]
    where: dict[str, Any] = {}

    def where_from() -> dict[str, Any]:
        if not where:
            where.update(json.loads(texts.span(span, 0)))
        return where

    def entry_origins() -> dict[tuple[str, str], Origin]:
        files = where_from()["files"]
        return {(k, i): Origin(files[f], ln) for k, i, f, ln in where["entries"]}

    def test_origins() -> list[Origin]:
        files = where_from()["files"]
        return [Origin(files[f], ln) for f, ln in where["tests"]]

    start, stop = doc["tests"]
    kb.origins = cast(dict[tuple[str, str], Origin], _LazyOrigins(entry_origins))
    kb.test_origins = cast(list[Origin], _LazyList(test_origins))
    # Rule tests are only read by `kb test`, which uses them all: validate them when asked.
    kb.tests = cast(
        list[RuleTest],
        _LazyList(
            lambda: [
                RuleTest.model_validate_json(t, context=CHECKED) for t in texts.lines(start, stop)
            ]
        ),
    )
    kb.aliases = dict(doc["aliases"])
    m = doc["model"]
    tables = {}
    groups: dict[str, RowGroups] = {}
    for fid, t in m["facts"].items():
        classes = t["classes"]
        table = FactTable(
            id=fid,
            classes=classes,
            index={c: i for i, c in enumerate(classes)},
            healthy=t["healthy"],
        )
        rows, linked, row = t["rows"], t["linked"], t["row"]
        table.likelihood = {ci: rows[r] for ci, r in zip(linked, row)}
        table.paths = _LazyPaths(linked, texts, t["paths"])
        members: list[list[int]] = [[] for _ in rows]
        for ci, r in zip(linked, row):
            members[r].append(ci)
        groups[fid] = RowGroups(rows, dict(zip(linked, row)), members)
        tables[fid] = table
    causes = m["causes"]
    if causes is None:
        causes = [*doc["entries"]["causes"]["ids"], CATCH_ALL]
    gates = {ci: facts for facts, members in m["gates"] for ci in members}
    model = CompiledModel(
        causes=causes,
        priors=m["priors"],
        facts=tables,
        gates=dict(sorted(gates.items())),
        measured=frozenset(m["measured"]),
        setup=frozenset(m["setup"]),
        display=frozenset(m["display"]),
        symptoms=frozenset(m["symptoms"]),
        configuration=frozenset(m["configuration"]),
        parent=m["parent"],
        public=[*doc["entries"]["causes"]["ids"], CATCH_ALL] if m["parent"] else [],
    )
    model.__dict__["_row_groups"] = groups
    model.__dict__["gate_groups"] = [(facts, members) for facts, members in m["gates"]]
    return kb, model, list(doc["racy"])


def load_cached(dirs: list[Path]) -> tuple[KnowledgeBase, CompiledModel | None]:
    """The KB (and its compiled model when it loaded without problems)."""
    found: Stamp | None = None
    if not os.environ.get("DDPADVISOR_NO_CACHE"):
        try:
            found = Stamp(dirs)
        except OSError:
            found = None  # a missing folder or file: the loader says which
    path = cache_dir() / found.name if found else None
    if path is not None and path.is_file() and trusted(path):
        try:
            data = _read(path)
            kb, model, checked = _restore(data)
        except Stale:
            pass  # rebuilt below, without a word: an upgrade or an edit does this
        except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
            _note_damage(path, exc)  # Damaged, or something _check did not foresee
        else:
            if checked and found is not None and not _racy_now(found, checked):
                _settle(path, data, found.prefix)
            return kb, model
    # Racy files are hashed before they are loaded: a later edit then fails the check.
    racy = found.racy() if found else {}
    from ddpadvisor.kb.load import load_kb

    kb = load_kb(dirs)
    if kb.problems:
        return kb, None
    model = load_model(kb)
    if path is not None and found is not None:
        data = _dump(kb, model, racy)
        if len(data) <= MAX_CACHE_BYTES:
            _write(path, data, found.prefix)
    return kb, model


def _read(path: Path) -> bytes:
    """The cache file's bytes: a regular file of bounded size, or :class:`Damaged`."""
    from ddpadvisor.yamlio import NotARegularFile, read_regular

    try:
        data, longer = read_regular(path, MAX_CACHE_BYTES)
    except NotARegularFile:
        raise Damaged("not a regular file") from None
    if longer:
        raise Damaged(f"larger than {MAX_CACHE_BYTES} bytes")
    return data


def _note_damage(path: Path, exc: BaseException) -> None:
    """One line on stderr: the cache was damaged (by a crash, a full disk or a hand) and is
    rebuilt from the rule files; the rebuild below replaces the file."""
    import sys

    why = str(exc) if isinstance(exc, Damaged) else f"{type(exc).__name__}"
    sys.stderr.write(
        f"ddpadvisor: note: the KB cache {path.name} was damaged ({why}); rebuilt from the "
        "rule files\n"
    )


def _racy_now(found: Stamp, checked: list[str]) -> bool:
    return bool(set(checked) & {str(p) for p in found.racy_files()})


def _settle(path: Path, data: bytes, prefix: str) -> None:
    """The racy files matched their digests and are now older than the racy window, so their
    stamps pin their content from here on: drop the check, and the hashing, from the cache."""
    end = data.index(b"\n")
    doc = json.loads(data[:end])
    doc["racy"] = {}
    head = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    _write(path, head + data[end:], prefix)


def _write(path: Path, data: bytes, prefix: str) -> None:
    """Write atomically, then drop older caches of the same folders (their stamps are gone)."""
    import tempfile  # only a cold start writes

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
        for old in path.parent.glob(f"{prefix}-*.json"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home is fine: just slower
