"""Reading a trace folder: bounded, validated against the agent's format, one run per rank."""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.sources.rankfiles import rank_files
from ddpadvisor.tracing.agent.ddpadvisor_trace_agent import format as fmt
from ddpadvisor.yamlio import NotARegularFile, bounded_int, read_regular, unique_keys

Record = dict[str, Any]


@dataclass
class RankTrace:
    rank: int
    path: Path
    records: list[Record] = field(default_factory=list)
    start: Record = field(default_factory=dict)
    steps: dict[int, Record] = field(default_factory=dict)
    checks: dict[int, Record] = field(default_factory=dict)
    final: Record | None = None
    bufchecks: dict[int, Record] = field(default_factory=dict)
    epochs: list[Record] = field(default_factory=list)

    def kind(self, k: str) -> list[Record]:
        return [r for r in self.records if r.get("k") == k]

    def first(self, k: str) -> Record | None:
        for r in self.records:
            if r.get("k") == k:
                return r
        return None


WARNINGS_PER_FILE = 12  # record problems named one by one; the rest are counted


def _read_bounded(path: Path, limit: int) -> tuple[bytes, bool]:
    try:
        return read_regular(path, limit)
    except NotARegularFile:
        raise InputError("not a regular file (a FIFO, device or folder); not read", path) from None


@dataclass
class Line:
    """One line of a rank file as read: its record, or the problem that kept it out."""

    number: int
    record: Any = None
    problem: str | None = None  # "too long", "not valid JSON", "duplicate key ...", "truncated"


def lines_of(raw: bytes) -> Iterator[Line]:
    """The one parser of the trace's JSON-lines format; every reader of a trace folder (the
    reader here, the launcher's verdict, the TUI's plots) goes through it and decides itself
    what to make of a bad line. Blank lines are skipped; a last line without its newline that
    is not valid JSON is ``truncated`` (the rank stopped mid-write)."""
    lines = raw.split(b"\n")
    ends_clean = raw.endswith(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(line) > fmt.MAX_LINE_BYTES:
            yield Line(number, problem=f"record longer than {fmt.MAX_LINE_BYTES} bytes")
            continue
        try:
            yield Line(
                number, json.loads(line, object_pairs_hook=unique_keys, parse_int=bounded_int)
            )
        except (ValueError, RecursionError) as exc:
            last = number == len(lines) or (number == len(lines) - 1 and ends_clean)
            if last and not ends_clean:
                yield Line(number, problem="truncated")
            else:
                known = ("duplicate key", "an integer of")
                why = str(exc)[:80] if str(exc).startswith(known) else "not valid JSON"
                yield Line(number, problem=why)


def _read_rank_file(path: Path, rank: int, raw: bytes, warnings: list[str]) -> RankTrace | None:
    """One rank's last run, or None when the file cannot be this rank's trace."""
    trace = RankTrace(rank, path)
    runs = 0
    start_line = 1
    problems: list[str] = []
    for line in lines_of(raw):
        number, rec = line.number, line.record
        if line.problem == "truncated":
            warnings.append(
                f"{path}:{number}: truncated last record ignored (rank {rank} stopped mid-write)"
            )
            continue
        if line.problem is not None:
            if line.problem.startswith("record longer"):
                problems.append(f"{path}:{number}: {line.problem}")
            else:
                problems.append(f"{path}:{number}: unreadable record ({line.problem})")
            continue
        bad = fmt.problem(rec)
        if bad is not None:
            problems.append(f"{path}:{number}: {bad}")
            continue
        if rec["k"] == "start":
            version = rec.get("v", 1)
            if version not in fmt.READABLE_VERSIONS:
                warnings.append(
                    f"{path}:{number}: trace format version {version} is not one this reader "
                    f"knows ({', '.join(map(str, fmt.READABLE_VERSIONS))}); file not used"
                )
                return None
            if rec["rank"] != rank:
                warnings.append(
                    f"{path}:{number}: the file says it is rank {rec['rank']}'s trace, its name "
                    f"says rank {rank}; file not used"
                )
                return None
            runs += 1
            start_line = number
            trace.records = []
        trace.records.append(rec)
    for text in problems[:WARNINGS_PER_FILE]:
        warnings.append(f"{text}; record skipped")
    if len(problems) > WARNINGS_PER_FILE:
        warnings.append(f"{path}: {len(problems) - WARNINGS_PER_FILE} more bad records skipped")
    if runs > 1:
        warnings.append(f"{path} holds {runs} runs; reading the last one (from line {start_line})")
    if trace.records and runs == 0:
        warnings.append(f"{path}: no start record (the beginning of the file is missing)")
    _index(trace, warnings)
    return trace


def _index(trace: RankTrace, warnings: list[str]) -> None:
    trace.start = trace.first("start") or {}
    indices: dict[int, list[int]] = {}
    complete: dict[int, bool] = {}
    mods: dict[int, int] = {}
    ended: dict[int, float] = {}
    duplicates: list[int] = []
    for rec in trace.records:
        if rec.get("k") == "step" and rec.get("s") in trace.steps:
            duplicates.append(rec["s"])
            continue
        k = rec.get("k")
        s = rec.get("s")
        if k == "restart":  # a phase before wrapping, or on another DDP model: drop its steps
            trace.steps.clear()
            trace.checks.clear()
            trace.bufchecks.clear()
        elif k == "step" and isinstance(s, int):
            trace.steps[s] = rec
        elif k == "chk" and isinstance(s, int):
            if rec.get("final"):
                trace.final = rec
            else:
                trace.checks[s] = rec
        elif k == "bufchk" and isinstance(s, int):
            trace.bufchecks[s] = rec
        elif k == "epoch":
            trace.epochs.append(dict(rec))
        elif k == "idx":
            it = int(rec.get("it", 0))
            indices.setdefault(it, []).extend(int(i) for i in rec.get("idx", []))
            if rec.get("end"):
                complete[it] = True
                if isinstance(rec.get("t"), (int, float)):
                    ended[it] = float(rec["t"])
            if rec.get("mod"):
                mods[it] = int(rec["mod"])
    if duplicates:
        warnings.append(
            f"{trace.path}: step {duplicates[0]} recorded more than once"
            + (f" ({len(duplicates)} duplicates)" if len(duplicates) > 1 else "")
            + "; the first record of each step is used"
        )
    for ep in trace.epochs:
        it = int(ep.get("it", 0))
        ep["indices"] = indices.get(it, [])
        ep["complete"] = complete.get(it, False)
        if it in ended:
            ep["end_t"] = ended[it]  # when the iteration ran out (the agent's clock)
        ep["mod"] = mods.get(it, 1)


WORKER_FILE_BYTES = 1 << 20  # a few short lines per worker of the first iterators


def _read_worker_file(path: Path, trace: RankTrace, warnings: list[str]) -> None:
    """The rank's DataLoader workers' records (``wfetch``, hooks/workers.py), added to its
    trace; a missing file is no problem (no loader had workers), a bad line is skipped with
    a warning."""
    if not path.exists():
        return
    try:
        raw, longer = _read_bounded(path, WORKER_FILE_BYTES)
    except (InputError, OSError) as exc:
        text = exc.one_line() if isinstance(exc, InputError) else f"{path}: {exc.strerror}"
        warnings.append(f"{text}; the DataLoader workers' records are not used")
        return
    if longer:
        warnings.append(f"{path}: longer than {WORKER_FILE_BYTES} bytes; the rest is not read")
    bad = 0
    for line in lines_of(raw):
        rec = line.record
        if line.problem is not None or fmt.problem(rec) is not None or rec.get("k") != "wfetch":
            bad += 1
            continue
        trace.records.append(rec)
    if bad:
        warnings.append(f"{path}: {bad} unreadable worker record(s) skipped")


META_BYTES = 1 << 20


_META_KEYS: dict[str, type] = {
    "status": str,
    "failure": dict,
    "warnings": list,
    "command": list,
    "cwd": str,
}


def load_trace(folder: Path) -> tuple[list[RankTrace], dict[str, Any] | None, list[str]]:
    """Rank traces (sorted by rank), the launcher's meta.json if any, and reading warnings.

    A file that cannot be used is named in a warning and left out; an InputError (exit 2)
    when nothing usable is left."""
    folder = Path(folder)
    if not folder.exists():
        raise InputError("no such trace folder", folder)
    if not folder.is_dir():
        raise InputError("not a folder: give the output folder of 'ddpadvisor trace'", folder)
    warnings: list[str] = []
    ranks: list[RankTrace] = []
    rejected = 0
    seen: dict[bytes, Path] = {}
    for rank, path in rank_files(folder, "jsonl"):
        try:
            raw, longer = _read_bounded(path, fmt.MAX_FILE_BYTES)
        except InputError as exc:
            warnings.append(f"{exc.one_line()}")
            rejected += 1
            continue
        except OSError as exc:
            warnings.append(f"{path}: cannot read trace file: {exc.strerror}")
            rejected += 1
            continue
        if longer:
            warnings.append(f"{path}: longer than {fmt.MAX_FILE_BYTES} bytes; the rest is not read")
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        if raw and digest in seen:
            warnings.append(
                f"{path}: a byte-for-byte copy of {seen[digest].name}, not a trace of its own; "
                "file not used"
            )
            rejected += 1
            continue
        seen[digest] = path
        trace = _read_rank_file(path, rank, raw, warnings)
        if trace is None:
            rejected += 1
            continue
        _read_worker_file(folder / f"rank{rank}.workers.jsonl", trace, warnings)
        ranks.append(trace)
    meta = _read_meta(folder / "meta.json", warnings)
    if not ranks and meta is None:
        if rejected:
            raise InputError(f"no usable trace: {warnings[0] if warnings else 'no rank file'}")
        raise InputError("not a ddpadvisor trace folder: no rank*.jsonl files", folder)
    ranks.sort(key=lambda t: t.rank)
    return ranks, meta, warnings


def rank_records(folder: Path) -> dict[int, list[Record]]:
    """Each rank's records of its last run, read leniently (the launcher's verdict on a folder
    a job may still be writing): unreadable lines are skipped, nothing is validated."""
    found: dict[int, list[Record]] = {}
    for rank, path in rank_files(Path(folder), "jsonl"):
        try:
            raw, _longer = read_regular(path, fmt.MAX_FILE_BYTES)
        except OSError:
            continue
        records: list[Record] = []
        for line in lines_of(raw):
            rec = line.record
            if isinstance(rec, dict):
                if rec.get("k") == "start":
                    records = []
                records.append(rec)
        found[rank] = records
    return found


def _read_meta(path: Path, warnings: list[str]) -> dict[str, Any] | None:
    if not path.exists() and not path.is_symlink():
        return None
    try:
        raw, longer = _read_bounded(path, META_BYTES)
        if longer:
            raise ValueError(f"longer than {META_BYTES} bytes")
        meta = json.loads(raw, object_pairs_hook=unique_keys, parse_int=bounded_int)
    except InputError as exc:
        warnings.append(f"{exc.one_line()}; ignored")
        return None
    except OSError as exc:
        warnings.append(f"{path}: cannot read: {exc.strerror}; ignored")
        return None
    except (ValueError, RecursionError) as exc:
        warnings.append(f"{path}:{getattr(exc, 'lineno', 1)}: unreadable; ignored")
        return None
    if not isinstance(meta, dict):
        warnings.append(f"{path}:1: not a JSON object; ignored")
        return None
    clean: dict[str, Any] = {}
    for key, kind in _META_KEYS.items():
        if key in meta and isinstance(meta[key], kind):
            clean[key] = meta[key]
        elif key in meta and meta[key] is not None:
            warnings.append(f"{path}:1: '{key}' has the wrong type; ignored")
    if "warnings" in clean:
        clean["warnings"] = [w for w in clean["warnings"] if isinstance(w, str)][:50]
    if "failure" in clean and not isinstance(clean["failure"].get("message", ""), str):
        clean["failure"] = {}
    return {**{k: v for k, v in meta.items() if k not in _META_KEYS}, **clean}


SCRIPT_BYTES = 8 << 20  # a traced script larger than this is not scanned


def _start_from_launch(meta: dict[str, Any]) -> dict[str, Any] | None:
    """argv and cwd as a start record would hold them, read from the launcher's command:
    what follows ``-m torch.distributed.run`` and its options (all ``--name value`` pairs or
    flags), from the first ``.py`` on."""
    command = [str(x) for x in meta.get("command") or []]
    if "torch.distributed.run" not in command:
        return None
    rest = command[command.index("torch.distributed.run") + 1 :]
    script = next((i for i, arg in enumerate(rest) if arg.endswith(".py")), None)
    if script is None:
        return None
    return {"argv": rest[script:], "cwd": meta.get("cwd") or ""}


def traced_script(folder: Path) -> tuple[Path | None, str | None]:
    """The training script a trace ran (its start record's argv[0], resolved against the
    job's working directory), or None and why not. Only a regular ``.py`` file qualifies."""
    ranks, meta, _warnings = load_trace(Path(folder))
    start = next((t.start for t in ranks if t.start.get("argv")), None)
    if start is None:
        # no rank got as far as the agent's start record (it failed at import or in
        # init_process_group): the launcher's meta.json still holds the command it ran
        start = _start_from_launch(meta or {})
    if start is None:
        return None, "the trace does not record the job's command line"
    name = start["argv"][0]
    if not name.endswith(".py"):
        return None, f"the job's program {name!r} is not a Python script"
    path = Path(name)
    if not path.is_absolute():
        cwd = start.get("cwd")
        path = Path(cwd) / path if isinstance(cwd, str) and cwd else Path.cwd() / path
    try:
        st = path.stat()
    except OSError:
        return None, f"the traced script {path} is not here"
    if not stat.S_ISREG(st.st_mode) or st.st_size > SCRIPT_BYTES:
        return None, f"the traced script {path} is not a regular file under {SCRIPT_BYTES} bytes"
    return path, None
