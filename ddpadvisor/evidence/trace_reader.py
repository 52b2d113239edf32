"""Turn a ``ddpadvisor trace`` folder into measured facts.

Each rank wrote ``rank<R>.jsonl`` (see ``ddpadvisor/tracing/agent``); the launcher wrote
``meta.json`` (absent when the agent ran under the user's own torchrun/srun). Everything that
needs more than one rank is compared here, offline: replicas are compared exactly (DDP keeps
them bit-identical) and only at optimizer steps that every rank finished; batches, losses,
clip norms and GradScaler state step by step; sampler indices epoch by epoch.

A fact is emitted only when the trace measured it; everything else stays unobserved. Each
observation says where (``rank 1 step 37``) and what was seen, in a sentence.

Torch-free: reading a trace needs only the standard library.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import stat
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from ddpadvisor.errors import InputError
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.observation import Gathered, Observation, observe
from ddpadvisor.tracing.agent.ddpadvisor_trace_agent import format as fmt

Record = dict[str, Any]


# ------------------------------------------------------------------------------- loading
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
    """The file's first ``limit`` bytes and whether it is longer. Only regular files are
    opened (a FIFO or a device would block or never end), and without blocking."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file (a FIFO, device or folder); not read", path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise InputError("not a regular file; not read", path)
        data = fh.read(limit + 1)
    return data[:limit], len(data) > limit


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _read_rank_file(path: Path, rank: int, raw: bytes, warnings: list[str]) -> RankTrace | None:
    """One rank's last run, or None when the file cannot be this rank's trace."""
    trace = RankTrace(rank, path)
    lines = raw.split(b"\n")
    ends_clean = raw.endswith(b"\n")
    runs = 0
    start_line = 1
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(line) > fmt.MAX_LINE_BYTES:
            problems.append(f"{path}:{number}: record longer than {fmt.MAX_LINE_BYTES} bytes")
            continue
        try:
            rec = json.loads(line, object_pairs_hook=_no_duplicate_keys)
        except (ValueError, RecursionError) as exc:
            last = number == len(lines) or (number == len(lines) - 1 and ends_clean)
            if last and not ends_clean:
                warnings.append(
                    f"{path}:{number}: truncated last record ignored (rank {rank} stopped "
                    "mid-write)"
                )
            else:
                why = str(exc)[:80] if "duplicate key" in str(exc) else "not valid JSON"
                problems.append(f"{path}:{number}: unreadable record ({why})")
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
    duplicates: list[int] = []
    for rec in trace.records:
        if rec.get("k") == "step" and rec.get("s") in trace.steps:
            duplicates.append(rec["s"])
            continue
        k = rec.get("k")
        s = rec.get("s")
        if k == "restart":  # steps before the model was wrapped are another phase: drop them
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
        ep["mod"] = mods.get(it, 1)


RANK_FILE = re.compile(r"^rank(0|[1-9][0-9]{0,6})\.jsonl$")
META_BYTES = 1 << 20
_META_KEYS: dict[str, type] = {"status": str, "failure": dict, "warnings": list, "command": list}


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
    paths = [p for p in folder.glob("rank*.jsonl") if RANK_FILE.match(p.name)]
    for path in sorted(paths, key=lambda p: int(p.name[4:-6])):
        rank = int(path.name[4:-6])
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
        ranks.append(trace)
    meta = _read_meta(folder / "meta.json", warnings)
    if not ranks and meta is None:
        if rejected:
            raise InputError(f"no usable trace: {warnings[0] if warnings else 'no rank file'}")
        raise InputError("not a ddpadvisor trace folder: no rank*.jsonl files", folder)
    ranks.sort(key=lambda t: t.rank)
    return ranks, meta, warnings


def _read_meta(path: Path, warnings: list[str]) -> dict[str, Any] | None:
    if not path.exists() and not path.is_symlink():
        return None
    try:
        raw, longer = _read_bounded(path, META_BYTES)
        if longer:
            raise ValueError(f"longer than {META_BYTES} bytes")
        meta = json.loads(raw, object_pairs_hook=_no_duplicate_keys)
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


def traced_script(folder: Path) -> tuple[Path | None, str | None]:
    """The training script a trace ran (its start record's argv[0], resolved against the
    job's working directory), or None and why not. Only a regular ``.py`` file qualifies."""
    ranks, _meta, _warnings = load_trace(Path(folder))
    start = next((t.start for t in ranks if t.start.get("argv")), None)
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


# ------------------------------------------------------------------------------- helpers
def _same(a: Any, b: Any) -> bool:
    """Exact equality where NaN equals NaN (a skipped fp16 step has NaN gradients everywhere)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _odd_ranks(values: dict[int, Any]) -> list[int]:
    """Ranks whose value is not the most common one (ties: those that differ from rank 0)."""
    groups: list[tuple[Any, list[int]]] = []
    for rank, v in sorted(values.items()):
        for g in groups:
            if _same(g[0], v):
                g[1].append(rank)
                break
        else:
            groups.append((v, [rank]))
    if len(groups) <= 1:
        return []
    groups.sort(key=lambda g: (-len(g[1]), g[1][0]))
    majority = groups[0][1]
    if len(groups[0][1]) == len(groups[1][1]):
        majority = next(g[1] for g in groups if min(values) in g[1])
    return sorted(r for r in values if r not in majority)


def _ranks_text(ranks: Iterable[int]) -> str:
    ranks = list(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        return f"{x:.4g}"
    return str(x)


def _mode(values: list[Any]) -> Any:
    return Counter(values).most_common(1)[0][0] if values else None


def _finite(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _step_loss(rec: Record) -> float | None:
    losses = [v for v in rec.get("loss") or [] if isinstance(v, (int, float))]
    if not losses:
        return None
    return float(sum(losses) / len(losses))


# ------------------------------------------------------------------------------- reading
class _Facts:
    """Collects observations for facts the KB knows, one per fact."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.out: dict[str, Observation] = {}
        self.warnings: list[str] = []

    def add(
        self, fact: str, value: Any, where: str | None = None, detail: str | None = None
    ) -> None:
        spec = self.kb.facts.get(fact)
        if spec is None or value is None:
            return
        # The reader computes numbers; give them the fact's shape before the one typing check.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if spec.type == "bool":
                value = bool(value)
            elif spec.type == "int":
                value = int(value)
            elif spec.type == "float":
                value = round(float(value), 4)
        try:
            obs = observe(self.kb, fact, value, "trace", where, detail)
        except ValueProblem as exc:
            self.warnings.append(f"trace: {exc}; not used")
            return
        if obs is not None:
            self.out[fact] = obs


def read_trace(kb: KnowledgeBase, folder: Path) -> Gathered:
    """Measured facts from a trace folder; a failed run sets ``failed`` but keeps the facts."""
    ranks, meta, warnings = load_trace(Path(folder))
    facts = _Facts(kb)
    failed = False
    if meta is not None and meta.get("status") == "failed":
        failed = True
        failure = meta.get("failure") or {}
        warnings.append(f"trace run failed: {failure.get('message', 'unknown reason')}")
    for warning in (meta or {}).get("warnings", []) or []:
        warnings.append(f"trace run: {warning}")
    for t in ranks:
        exc = t.first("exception")
        if exc is not None and meta is None:
            failed = True
            warnings.append(
                f"rank {t.rank} raised {exc.get('type')}: {exc.get('msg')} at {exc.get('where')}"
            )
        for err in t.kind("agent_error"):
            warnings.append(
                f"rank {t.rank}: the trace agent switched off its '{err.get('part')}' "
                f"recording after an error: {err.get('error')} ({err.get('at', '?')})"
            )
    ranks = [t for t in ranks if t.records]
    if not ranks:
        warnings.append(
            f"{folder}: no rank recorded anything (did the script initialise torch.distributed?)"
        )
        return Gathered([], warnings, failed)
    worlds = {int(t.start.get("world") or 1) for t in ranks}
    world = max(worlds)
    if len(worlds) > 1:
        warnings.append(
            f"the rank files disagree on the world size ({', '.join(map(str, sorted(worlds)))}); "
            f"using {world}"
        )
    present = {t.rank for t in ranks}
    beyond = sorted(r for r in present if r >= world)
    if beyond:
        warnings.append(f"{_ranks_text(beyond)} lie outside the world size {world}")
    missing_count = world - len(present) + len(beyond)
    if missing_count > 0:
        missing = [r for r in range(min(world, len(present) + 8)) if r not in present][:8]
        shown = _ranks_text(missing) + (
            f" and {missing_count - 8} more" if missing_count > 8 else ""
        )
        warnings.append(f"{shown} wrote no trace; comparing the {len(present)} that did")
    if meta is None or meta.get("status") != "failed":
        for t in ranks:
            ended = any(r.get("k") in ("end", "exception", "final", "destroy") for r in t.records)
            if not ended:
                last = max(t.steps) if t.steps else 0
                warnings.append(
                    f"{t.path}: rank {t.rank}'s trace stops at step {last} without an end record "
                    "(the run was interrupted or is still running)"
                )
    ctx = _Context(ranks, world, facts)
    for part in (
        ctx.setup,
        ctx.replicas,
        ctx.sync,
        ctx.accumulation,
        ctx.clipping,
        ctx.scaler,
        ctx.scheduler,
        ctx.data,
        ctx.rng,
        ctx.losses,
        ctx.logging,
    ):
        try:
            part()
        except (
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            AttributeError,
            ArithmeticError,
        ) as exc:
            # The records passed the format check but are not what a real agent writes.
            warnings.append(
                f"trace: the {part.__name__} findings were not read: inconsistent records "
                f"({type(exc).__name__}: {str(exc)[:80]})"
            )
    return Gathered(list(facts.out.values()), warnings + facts.warnings, failed)


class _Context:
    def __init__(self, ranks: list[RankTrace], world: int, facts: _Facts) -> None:
        self.ranks = ranks
        self.world = world
        self.facts = facts
        self.by_rank = {t.rank: t for t in ranks}
        self.r0 = ranks[0]
        self.common_steps = sorted(set.intersection(*(set(t.steps) for t in ranks)))
        self.ddp = any(t.first("wrap") for t in ranks)
        self.accum = 1

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.facts.add(*args, **kwargs)

    # -- configuration as the job ran it -----------------------------------------------------
    def setup(self) -> None:
        r0 = self.r0
        backend = r0.start.get("backend")
        self.add("world_size", self.world, detail=f"{self.world} ranks ({backend})")
        if r0.start.get("torch"):
            self.add("torch_version", str(r0.start["torch"]))
        wrap = r0.first("wrap")
        if wrap is not None:
            bn = wrap.get("batchnorm") or []
            self.add("has_batchnorm", bool(bn), detail=f"module types: {', '.join(bn) or 'none'}")
            if bn:
                self.add("uses_syncbn", any("SyncBatchNorm" in b for b in bn))
            if wrap.get("n_buffers"):
                off = not wrap.get("forward_sync_buffers", True)
                self.add(
                    "broadcast_buffers_disabled",
                    off,
                    detail="DDP was built with broadcast_buffers=False" if off else None,
                )
            names = self._param_names()
            lora = [n for n in names if "lora" in n.lower()]
            self.add("uses_lora", bool(lora), detail=f"e.g. {lora[0]}" if lora else None)
            dtypes = wrap.get("dtypes") or []
            autocast = [
                r.get("autocast") for t in self.ranks for r in t.kind("cfg") if r.get("autocast")
            ]
            if "float16" in dtypes and "float32" not in dtypes:
                self.add("precision", "pure_fp16", detail="the wrapped parameters are float16")
            elif "bfloat16" in dtypes and "float32" not in dtypes:
                self.add("precision", "pure_bf16", detail="the wrapped parameters are bfloat16")
            elif "float16" in autocast:
                self.add("precision", "fp16_amp", detail="autocast to float16 with float32 weights")
            elif "bfloat16" in autocast:
                self.add(
                    "precision", "bf16_amp", detail="autocast to bfloat16 with float32 weights"
                )
            elif self.common_steps:
                self.add("precision", "fp32", detail="no autocast seen; float32 weights")
        if self.common_steps:
            scaler = any(r.get("scaler") for r in self._cfg())
            self.add("uses_grad_scaler", scaler)
            compiled = any(r.get("compile") for r in self._cfg())
            self.add("uses_torch_compile", compiled)
        opt = r0.first("opt")
        if opt is not None:
            cls = str(opt.get("cls", ""))
            family = "adam" if "adam" in cls.lower() else "sgd" if cls == "SGD" else "other"
            self.add("optimizer_family", family, detail=f"{cls}")
            betas = (opt.get("hp") or {}).get("betas")
            if family == "adam" and isinstance(betas, list) and len(betas) == 2:
                self.add("adam_beta2", float(betas[1]), detail=f"{cls} betas={betas}")
        sizes = [r.get("bs") for r in r0.steps.values() if isinstance(r.get("bs"), int)]
        if sizes:
            self.add(
                "per_gpu_batch_size", _mode(sizes), detail="batch dimension of the forward input"
            )
        regs = [(t.rank, r) for t in self.ranks for r in t.kind("reg")]
        if self.ddp:
            if regs:
                rank, r = regs[0]
                self.add(
                    "module_created_after_wrap",
                    True,
                    where=f"rank {rank} step {r.get('s')}",
                    detail=f"{r.get('kind')} '{r.get('name')}' ({r.get('cls')}) was added to the "
                    f"wrapped model after DistributedDataParallel was built"
                    + (f"; {len(regs) - 1} more" if len(regs) > 1 else ""),
                )
            else:
                self.add("module_created_after_wrap", False)
            self._loads()

    def _cfg(self) -> list[Record]:
        return [r for t in self.ranks for r in t.kind("cfg")]

    def _param_names(self) -> list[str]:
        for t in self.ranks:
            for chk in [*t.checks.values(), *([t.final] if t.final else [])]:
                if chk.get("params_names"):
                    return list(chk["params_names"])
        return []

    def _loads(self) -> None:
        per_rank = {
            t.rank: [
                (r.get("kind"), r.get("s"))
                for r in t.kind("load")
                if r.get("after_wrap") and r.get("wrapped")
            ]
            for t in self.ranks
        }
        if len(per_rank) < 2:
            return
        odd = _odd_ranks(per_rank)
        if not odd:
            # Only load_state_dict is watched; weights changed in place on some ranks are not
            # seen here (the replica checksums see their effect), so no "false" is measured.
            return
        loaders = [r for r, v in per_rank.items() if v]
        idle = [r for r, v in per_rank.items() if not v]
        kinds = sorted({str(k) for v in per_rank.values() for k, _ in v})
        step = next((s for v in per_rank.values() for _, s in v), 0)
        self.add(
            "rank_conditional_state_change",
            True,
            where=f"rank {loaders[0] if loaders else odd[0]} step {step}",
            detail=f"{_ranks_text(loaders)} loaded {'/'.join(map(str, kinds))} state into the wrapped "
            f"job after wrapping"
            + (f"; {_ranks_text(idle)} did not" if idle else "; the ranks did it differently"),
        )

    # -- replicas ---------------------------------------------------------------------------
    def _compare(
        self, checks: dict[int, dict[int, Record]], cat: str
    ) -> tuple[int, dict[str, Any] | None]:
        """(number of steps compared, first difference) for one fingerprint category."""
        compared = 0
        for step in sorted(checks):
            per_rank = checks[step]
            if len(per_rank) < 2:
                continue
            tables = {}
            for rank, rec in per_rank.items():
                names = rec.get(cat + "_names")
                values = rec.get(cat)
                if not isinstance(names, list) or not isinstance(values, list):
                    continue
                tables[rank] = dict(zip(names, values))
            if len(tables) < 2:
                continue
            compared += 1
            names_all = list(dict.fromkeys(n for tab in tables.values() for n in tab))
            diffs = []
            for name in names_all:
                values = {rank: tab.get(name) for rank, tab in tables.items()}
                odd = _odd_ranks(values)
                if odd:
                    diffs.append((name, odd))
            if diffs:
                return compared, {"step": step, "diffs": diffs}
        return compared, None

    def _checks_at_common_steps(self, source: str) -> dict[int, dict[int, Record]]:
        out: dict[int, dict[int, Record]] = {}
        for t in self.ranks:
            table = getattr(t, source)
            for step, rec in table.items():
                out.setdefault(step, {})[t.rank] = rec
        finals = {t.rank: t.final for t in self.ranks if t.final is not None}
        if source == "checks" and len(finals) == len(self.ranks):
            steps = {rec.get("s") for rec in finals.values()}
            if len(steps) == 1:
                step = steps.pop()
                if isinstance(step, int) and step not in out:
                    out[step] = dict(finals)
        return {s: v for s, v in out.items() if len(v) == len(self.ranks)}

    def _describe(self, diff: dict[str, Any], what: str) -> tuple[str, str]:
        name, odd = diff["diffs"][0]
        more = len(diff["diffs"]) - 1
        where = f"rank {odd[0]} step {diff['step']}"
        detail = f"{what} at step {diff['step']}: {name} ({_ranks_text(odd)})"
        if more:
            detail += f" and {more} more tensor{'s' if more > 1 else ''}"
        return where, detail

    def replicas(self) -> None:
        if len(self.ranks) < 2:
            return
        checks = self._checks_at_common_steps("checks")
        if checks:
            for cat, fact, what in (
                ("params", "param_checksums_match", "replicas diverged"),
                ("optim", "optimizer_state_match", "optimizer state diverged"),
            ):
                n, diff = self._compare(checks, cat)
                if diff:
                    where, detail = self._describe(diff, what)
                    self.add(fact, False, where=where, detail=detail)
                elif n:
                    self.add(fact, True, detail=f"identical on every rank at {n} checked steps")
            synced_steps = {
                s: v
                for s, v in checks.items()
                if all(self._last_synced(t.steps.get(s)) for t in self.ranks)
            }
            n, diff = self._compare(synced_steps, "grads")
            if diff:
                where, detail = self._describe(
                    diff, "gradients differ after a synchronising backward"
                )
                self.add("grads_match_after_sync", False, where=where, detail=detail)
            elif n:
                self.add("grads_match_after_sync", True, detail=f"identical at {n} checked steps")
            counts = [
                int(rec.get("n_unreduced") or 0) for per in checks.values() for rec in per.values()
            ]
            names = [
                n
                for per in checks.values()
                for rec in per.values()
                for n in rec.get("unreduced") or []
            ]
            if counts:
                worst = max(counts)
                note = None
                if worst:
                    shown = ", ".join(list(dict.fromkeys(names))[:3])
                    note = f"{worst} trainable parameter(s) are not in DDP's reducer: {shown}"
                self.add("params_not_in_reducer", worst, detail=note)
        bufs = self._checks_at_common_steps("bufchecks")
        n, diff = self._compare(bufs, "buffers")
        if diff:
            where, detail = self._describe(diff, "buffers differ across ranks")
            self.add("buffer_checksums_match", False, where=where, detail=detail)
        elif n:
            self.add("buffer_checksums_match", True, detail=f"identical at {n} checked steps")

    @staticmethod
    def _last_synced(rec: Record | None) -> bool:
        syn = (rec or {}).get("syn") or []
        return bool(syn) and bool(syn[-1])

    # -- gradient synchronisation ------------------------------------------------------------
    def sync(self) -> None:
        if not self.ddp:
            return
        worst: tuple[int, int, list[int]] | None = None
        unsynced_final = []
        flag_late = 0
        nosync_forward = False
        bypass = []
        for t in self.ranks:
            steps = [r for r in t.steps.values() if r.get("syn")]
            never = [r["s"] for r in steps if not any(r["syn"])]
            if worst is None or len(never) > worst[0]:
                worst = (len(never), t.rank, never)
            for r in steps:
                if not r["syn"][-1]:
                    unsynced_final.append((t.rank, r["s"]))
                    flags = r.get("bflag") or []
                    if flags and flags[-1]:
                        flag_late += 1
            nosync_forward = nosync_forward or any(
                f is False for r in t.steps.values() for f in r.get("fflag") or []
            )
            bypass += [(t.rank, r["s"], r["byp"]) for r in t.steps.values() if r.get("byp")]
        total = len(self.r0.steps)
        if worst is not None and total:
            count, rank, never = worst
            detail = None
            where = None
            if count:
                where = f"rank {rank} step {never[0]}"
                detail = (
                    f"{count} of {total} optimizer steps ran on gradients that no backward had "
                    f"all-reduced (first: step {never[0]})"
                )
            self.add("optimizer_steps_without_sync", count, where=where, detail=detail)
        if total and any(r.get("syn") for r in self.r0.steps.values()):
            if unsynced_final:
                rank, step = unsynced_final[0]
                detail = (
                    f"the last backward before {len(unsynced_final)} optimizer step(s) did not "
                    f"synchronise gradients (first: rank {rank} step {step})"
                )
                if flag_late:
                    detail += (
                        "; require_backward_grad_sync was True at backward but False at forward: "
                        "DDP decides in forward"
                    )
                self.add(
                    "final_micro_step_synced",
                    False,
                    where=f"rank {rank} step {step}",
                    detail=detail,
                )
            else:
                self.add("final_micro_step_synced", True)
        self.add("uses_no_sync", nosync_forward)
        self._norm_ratio()
        hooks = [
            r.get("comm_hook") or "a built-in hook"
            for r in self._cfg()
            if r.get("comm_hook") or r.get("builtin_comm_hook")
        ]
        by_hand = sum(int(r.get("bigred") or 0) for r in self.r0.steps.values())
        if hooks:
            self.add(
                "uses_comm_hook", True, detail=f"DDP communication hook registered: {hooks[0]}"
            )
        elif by_hand:
            self.add(
                "uses_comm_hook",
                True,
                detail=f"{by_hand} large all_reduce calls inside training steps on top of DDP's own "
                "(gradients reduced by hand?)",
            )
        elif total:
            self.add("uses_comm_hook", False)
        if bypass:
            rank, step, _ = bypass[0]
            self.add(
                "forward_bypasses_ddp",
                True,
                where=f"rank {rank} step {step}",
                detail=f"training forwards ran through the inner module, outside the DDP wrapper "
                f"({sum(b[2] for b in bypass)} times; first at step {step})",
            )
        elif total:
            self.add("forward_bypasses_ddp", False)

    def _norm_ratio(self) -> None:
        """Post-sync norm over the mean of the ranks' pre-sync norms (<= 1 for an average)."""
        ratios = []
        for s in self.common_steps:
            recs = [t.steps[s] for t in self.ranks]
            pre = [r.get("pre") for r in recs]
            post = recs[0].get("post")
            pre_norms = [float(p) for p in pre if _finite(p) and p > 0]
            if len(pre_norms) < len(pre) or not _finite(post):
                continue
            ratios.append((float(post) / statistics.fmean(pre_norms), s))
        if len(ratios) < 3:
            return
        value = statistics.median(r for r, _ in ratios)
        detail = f"median over {len(ratios)} steps"
        if value >= 1.1:
            worst, at = max(ratios)
            detail = (
                f"the all-reduced gradient norm is {_fmt(value)}x the ranks' mean local norm "
                f"(up to {_fmt(worst)}x at step {at}): gradients are summed, not averaged"
            )
        self.add("synced_grad_norm_ratio", value, detail=detail)

    # -- accumulation, loss scaling, zero_grad -------------------------------------------------
    def accumulation(self) -> None:
        steps = [r for r in self.r0.steps.values() if r.get("loss")]
        if not steps:
            return
        micro = []
        for r in steps:
            digests = r.get("dig") or []
            distinct = len({json.dumps(d) for d in digests}) if digests else len(r["loss"])
            micro.append(max(1, min(distinct, len(r["loss"]))))
        body = micro[1:-1] if len(micro) > 4 else micro
        accum = int(_mode(body))
        self.accum = accum
        self.add(
            "grad_accum_steps",
            accum,
            detail=f"{accum} micro-batch(es) with a backward per optimizer step",
        )
        if accum == 1:
            synced = [sum(1 for s in r.get("syn") or [] if s) for r in steps]
            if synced and any(r.get("syn") for r in steps):
                mean = sum(synced) / len(synced)
                detail = None
                if mean >= 1.5:
                    detail = (
                        f"{mean:.2g} gradient-synchronising backward passes per optimizer step on "
                        "a single micro-batch: auxiliary backwards go through the DDP model"
                    )
                self.add("synced_backwards_per_optimizer_step", mean, detail=detail)
                self.add("extra_backward_through_ddp", mean >= 1.5, detail=detail)
        else:
            windows = [r for r in steps if len(r["loss"]) >= 2]
            zeroed = [r["s"] for r in windows if r.get("zb")]
            if windows:
                share = len(zeroed) / len(windows)
                self.add(
                    "zero_grad_every_micro_step",
                    share >= 0.5,
                    where=f"rank {self.r0.rank} step {zeroed[0]}" if zeroed else None,
                    detail=(
                        f"gradients were zeroed between micro-batches in {len(zeroed)} of "
                        f"{len(windows)} accumulation windows: only the last micro-batch counts"
                    )
                    if zeroed
                    else None,
                )
        factors = [f for r in steps for f in r.get("fac") or [] if isinstance(f, (int, float))]
        tensor_div = any(any(r.get("tdiv") or []) for r in steps)
        factor = _mode([round(f, 9) for f in factors]) if factors else None
        if accum >= 2 and (factor is not None or tensor_div):
            divided = tensor_div or (factor is not None and factor < 0.999)
            if divided:
                how = (
                    f"by {_fmt(1 / factor)}"
                    if factor is not None and not tensor_div
                    else "by a token/sample count"
                )
                detail = f"the loss is divided {how} before backward"
            else:
                detail = (
                    f"loss not divided by accumulation steps: grad norm scales with accumulation "
                    f"(the backward'd loss carries factor {_fmt(factor)}, so {accum} micro-batches "
                    f"add up to {accum}× the mean gradient)"
                )
            self.add("loss_divided_by_accum", divided, detail=detail)
            self.add("grad_norm_scales_with_accum", not divided, detail=None if divided else detail)
        if factor is not None and self.world > 1:
            scaled = any(abs(factor * k - self.world) < 1e-6 for k in (1, accum)) and factor > 1
            self.add(
                "loss_multiplied_by_world_size",
                scaled,
                detail=f"the loss is multiplied by {_fmt(factor)} (= world size) before backward"
                if scaled
                else None,
            )

    # -- clipping ----------------------------------------------------------------------------
    def clipping(self) -> None:
        if not self.common_steps:
            return
        clipped = any(r.get("clip") for t in self.ranks for r in t.steps.values())
        self.add("uses_grad_clipping", clipped)
        if not clipped:
            return
        # A clip followed by another backward before the optimizer step measured gradients that
        # were not final. (A clip after an unsynchronised last backward is the sync fault's.)
        inside = [
            (t.rank, r["s"])
            for t in self.ranks
            for r in t.steps.values()
            for ctx in r.get("cctx") or []
            if ctx[2]
        ]
        if inside:
            rank, step = inside[0]
            self.add(
                "clip_inside_no_sync",
                True,
                where=f"rank {rank} step {step}",
                detail="clip_grad_norm_ ran on gradients that were not yet all-reduced "
                f"(inside an accumulation window; first at step {step})",
            )
        elif self.ddp:
            self.add("clip_inside_no_sync", False)
        scaled = any(r.get("scaler") for r in self._cfg())
        if scaled:
            early = [
                (t.rank, r["s"])
                for t in self.ranks
                for r in t.steps.values()
                for ctx in r.get("cctx") or []
                if ctx[1]
            ]
            if early:
                rank, step = early[0]
                self.add(
                    "unscale_before_clip",
                    False,
                    where=f"rank {rank} step {step}",
                    detail="clip_grad_norm_ ran on scaled gradients: GradScaler.unscale_ was not "
                    "called first, so the threshold applies to loss-scaled norms",
                )
            else:
                self.add("unscale_before_clip", True)
        if len(self.ranks) < 2:
            return

        def clip_shown(values: dict[int, Any], odd: list[int], s: int) -> str:
            shown = ", ".join(
                f"{_fmt(v[0] if isinstance(v, list) and v else v)} on rank {r}"
                for r, v in sorted(values.items())
            )
            return f"clip_grad_norm_ returned {shown} at step {s}"

        self._compare_per_step(
            "clip_norms_match_across_ranks",
            read=lambda rec: rec.get("clip"),
            describe=clip_shown,
            # Until the final gradients are all-reduced the norms differ for that reason alone.
            usable=lambda s: all(self._last_synced(t.steps[s]) for t in self.ranks),
        )

    # -- GradScaler and non-finite gradients -------------------------------------------------------
    def scaler(self) -> None:
        worst = (0, self.r0.rank, None)
        for t in self.ranks:
            bad = []
            for r in t.steps.values():
                norms = [r.get("pre"), r.get("post")]
                nonfinite = any(isinstance(n, (int, float)) and not math.isfinite(n) for n in norms)
                if nonfinite or (isinstance(r.get("finf"), (int, float)) and r["finf"] > 0):
                    bad.append(r["s"])
            if len(bad) > worst[0]:
                worst = (len(bad), t.rank, bad[0])
        if self.common_steps:
            count, rank, first = worst
            self.add(
                "nonfinite_grad_steps",
                count,
                where=f"rank {rank} step {first}" if count else None,
                detail=f"{count} optimizer step(s) had inf/NaN gradients (first: step {first})"
                if count
                else None,
            )
        if len(self.ranks) < 2:
            return

        def scaler_shown(values: dict[int, Any], odd: list[int], s: int) -> str:
            shown = ", ".join(
                f"rank {r}: scale {_fmt(v[0])}, tracker {v[1]}" for r, v in sorted(values.items())
            )
            return f"scaler state differs on {_ranks_text(odd)} at step {s} ({shown})"

        self._compare_per_step(
            "scaler_state_match",
            read=lambda rec: (
                None if rec.get("scale") is None else [rec["scale"], rec.get("growth")]
            ),
            describe=scaler_shown,
        )

    def _compare_per_step(
        self,
        fact: str,
        read: Callable[[Record], Any],
        describe: Callable[[dict[int, Any], list[int], int], str],
        usable: Callable[[int], bool] = lambda s: True,
    ) -> None:
        """``fact`` is false at the first common step where a rank's value stands out, true
        when every compared step agrees; steps where a rank has no value are skipped."""
        compared = 0
        for s in self.common_steps:
            if not usable(s):
                continue
            values = {t.rank: read(t.steps[s]) for t in self.ranks}
            if any(v is None for v in values.values()):
                continue
            compared += 1
            odd = _odd_ranks(values)
            if odd:
                self.add(
                    fact, False, where=f"rank {odd[0]} step {s}", detail=describe(values, odd, s)
                )
                return
        if compared:
            self.add(fact, True, detail=f"equal at {compared} steps")

    # -- LR scheduler ------------------------------------------------------------------------
    def scheduler(self) -> None:
        t = self.r0
        if not t.kind("sched") or not t.steps:
            return
        end = t.first("end")
        total = int(
            (end or {}).get("sched") or sum(int(r.get("sch") or 0) for r in t.steps.values())
        )
        steps = max(t.steps)
        ratio = total / steps if steps else 0.0
        train = self._train_sampler(t)
        epochs = len([e for e in t.epochs if e.get("sampler") == train and _covers(e)])
        if ratio < 0.9 and epochs and abs(total - epochs) <= 1 and steps / max(epochs, 1) > 1.5:
            return  # a per-epoch schedule: stepping once per epoch is how it is meant to run
        detail = f"{total} scheduler steps for {steps} optimizer steps"
        if ratio >= 1.1 and self.accum >= 2 and abs(ratio - self.accum) < 0.5:
            detail += (
                f": the scheduler steps on every micro-batch ({self.accum} per optimizer step)"
            )
        self.add("scheduler_steps_per_optimizer_step", ratio, detail=detail)

    # -- data: batches, samplers ---------------------------------------------------------------
    @staticmethod
    def _train_sampler(t: RankTrace) -> int | None:
        """The sampler whose epochs saw the optimizer steps (eval loaders see none)."""
        score: Counter[int] = Counter()
        epochs = sorted(t.epochs, key=lambda e: e.get("it", 0))
        last_step = max(t.steps) if t.steps else 0
        for i, ep in enumerate(epochs):
            end = epochs[i + 1].get("s", last_step) if i + 1 < len(epochs) else last_step
            score[int(ep.get("sampler", 0))] += max(0, int(end or 0) - int(ep.get("s") or 0))
        for ep in epochs:
            score[int(ep.get("sampler", 0))] += 0
        if not score:
            return None
        best = max(score.values())
        if best == 0:
            return max(
                score, key=lambda k: sum(len(e["indices"]) for e in epochs if e.get("sampler") == k)
            )
        return max(score, key=lambda k: score[k])

    def data(self) -> None:
        self._batches()
        self._tokens()
        self._samplers()

    def _batches(self) -> None:
        """Batches one rank fed that another rank fed too, at the same step or at any other
        (a rank reading another rank's batches one step later is as wrong)."""
        if len(self.ranks) < 2:
            return
        seen: dict[str, dict[int, int]] = {}  # batch digest -> rank -> first step
        for t in self.ranks:
            for s, rec in sorted(t.steps.items()):
                for d in rec.get("dig") or []:
                    seen.setdefault(json.dumps(d), {}).setdefault(t.rank, s)
        compared = 0
        dup = []
        for s in self.common_steps:
            digests = {t.rank: t.steps[s].get("dig") for t in self.ranks}
            if any(not d for d in digests.values()):
                continue
            compared += 1
            pairs = []
            for b, ds in sorted(digests.items()):
                for d in ds or []:
                    others = {a: at for a, at in seen.get(json.dumps(d), {}).items() if a != b}
                    if others:
                        a = min(others)
                        pairs.append((min(a, b), max(a, b), others[a]))
                        break
            if pairs:
                a, b, at = pairs[0]
                dup.append((s, (a, b), at))
        if not compared:
            return
        share = len(dup) / compared
        if share >= 0.1:
            s, (a, b), at = dup[0]
            offset = "" if at == s else f"; one rank fed it at step {at}, the other at step {s}"
            self.add(
                "batches_duplicated_across_ranks",
                True,
                where=f"rank {b} step {s}",
                detail=f"ranks {a} and {b} fed identical batches at {len(dup)} of {compared} steps "
                f"(first: step {s}{offset})",
            )
        else:
            self.add(
                "batches_duplicated_across_ranks",
                False,
                detail=f"no shared batch in {compared} steps",
            )

    def _tokens(self) -> None:
        """Largest over smallest per-rank target-token count, per step (labels != -100)."""
        if len(self.ranks) < 2:
            return
        ratios = []
        for s in self.common_steps:
            counts = [sum(t.steps[s].get("tok") or []) for t in self.ranks]
            if all(isinstance(c, (int, float)) for c in counts) and all(
                t.steps[s].get("tok") for t in self.ranks
            ):
                ratios.append((max(counts) / max(min(counts), 1), s))
        if len(ratios) < 3:
            return
        ordered = sorted(r for r, _ in ratios)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        worst, at = max(ratios)
        self.add(
            "token_count_imbalance",
            p90,
            where=f"step {at}" if worst > 1 else None,
            detail=f"per-rank target tokens differ up to {_fmt(worst)}x (step {at}); "
            f"90th percentile {_fmt(p90)}x over {len(ratios)} steps",
        )

    def _samplers(self) -> None:
        per_rank: dict[int, list[Record]] = {}
        cls = None
        for t in self.ranks:
            sid = self._train_sampler(t)
            if sid is None:
                continue
            eps = sorted(
                (e for e in t.epochs if e.get("sampler") == sid), key=lambda e: e.get("it", 0)
            )
            if eps:
                per_rank[t.rank] = eps
                cls = eps[0].get("cls")
        if not per_rank:
            return
        distributed = cls == "DistributedSampler" or any(
            "num_replicas" in e for eps in per_rank.values() for e in eps
        )
        shuffles = any(e.get("shuffle") for eps in per_rank.values() for e in eps)
        overlap = self._shard_overlap(per_rank)
        if distributed:
            self.add("uses_distributed_sampler", True, detail=f"{cls}")
            seeds = {r: eps[0].get("seed") for r, eps in per_rank.items() if "seed" in eps[0]}
            if len(seeds) >= 2:
                odd = _odd_ranks(seeds)
                self.add(
                    "sampler_seed_rank_dependent",
                    bool(odd),
                    where=f"rank {odd[0]}" if odd else None,
                    detail="DistributedSampler seed per rank: "
                    + ", ".join(f"rank {r}: {v}" for r, v in sorted(seeds.items()))
                    if odd
                    else None,
                )
        elif overlap is not None:
            disjoint = overlap[0] == 0
            self.add(
                "uses_distributed_sampler",
                disjoint,
                detail=None
                if disjoint
                else f"{cls} on every rank: nothing splits the data by rank",
            )
        if overlap is not None:
            count, share, a, b, epoch_no = overlap
            padding = self.world  # DistributedSampler repeats fewer than W samples to pad
            shared = count > padding or (count > 0 and share > 0.05 and not distributed)
            detail = None
            if shared:
                detail = (
                    f"ranks {a} and {b} read {share:.0%} the same samples in epoch {epoch_no}"
                    if share > 0.99
                    else f"ranks {a} and {b} shards share {count} indices ({share:.0%}) in epoch "
                    f"{epoch_no}"
                )
            self.add(
                "sampler_shards_overlap",
                shared,
                where=f"rank {b} epoch {epoch_no}" if shared else None,
                detail=detail,
            )
        if shuffles:
            self._epoch_order(per_rank, distributed)

    def _shard_overlap(
        self, per_rank: dict[int, list[Record]]
    ) -> tuple[int, float, int, int, int] | None:
        """Worst pairwise index overlap between ranks in the same epoch ordinal."""
        if len(per_rank) < 2:
            return None
        worst = None
        n_epochs = min(len(eps) for eps in per_rank.values())
        ranks = sorted(per_rank)
        for e in range(n_epochs):
            sets = {r: set(per_rank[r][e]["indices"]) for r in ranks}
            for i, a in enumerate(ranks):
                for b in ranks[i + 1 :]:
                    if not sets[a] or not sets[b]:
                        continue
                    count = len(sets[a] & sets[b])
                    share = count / min(len(sets[a]), len(sets[b]))
                    if worst is None or share > worst[1]:
                        worst = (count, share, a, b, e + 1)
        return worst

    def _epoch_order(self, per_rank: dict[int, list[Record]], distributed: bool) -> None:
        compared = 0
        for rank, eps in sorted(per_rank.items()):
            full = [e for e in eps if _covers(e) and e["indices"]]
            for prev, cur in itertools.pairwise(full):
                compared += 1
                if prev["indices"] == cur["indices"]:
                    n = eps.index(cur) + 1
                    self.add(
                        "sampler_order_repeats_across_epochs",
                        True,
                        where=f"rank {rank} epoch {n}",
                        detail=f"epoch {n} order equals epoch {n - 1} (rank {rank})",
                    )
                    if distributed:
                        self._set_epoch(per_rank, repeats=True)
                    return
        if compared:
            self.add(
                "sampler_order_repeats_across_epochs",
                False,
                detail=f"{compared} epoch pairs differ",
            )
        if distributed:
            self._set_epoch(per_rank, repeats=False)

    def _set_epoch(self, per_rank: dict[int, list[Record]], repeats: bool) -> None:
        eps = [e for e in per_rank[min(per_rank)] if _covers(e)]
        if not eps:
            return
        calls = eps[-1].get("set_epoch_calls") or []
        values = [e.get("epoch") for e in eps]
        if len(eps) >= 2:
            changing = len(set(values)) > 1
            if changing:
                self.add("calls_set_epoch", True)
            else:
                detail = (
                    f"set_epoch was called with the same value {values[0]} every epoch"
                    if calls
                    else "DistributedSampler.set_epoch was never called"
                )
                self.add("calls_set_epoch", False, detail=f"{detail}: every epoch reuses one order")
        elif calls:
            self.add("calls_set_epoch", True)

    # -- RNG ---------------------------------------------------------------------------------
    def rng(self) -> None:
        if len(self.ranks) < 2:
            return
        raw = {t.rank: (t.first("wrap") or {}).get("seeds") for t in self.ranks}
        seeds: dict[int, dict[str, Any]] = {r: v for r, v in raw.items() if isinstance(v, dict)}
        if len(seeds) == len(raw) and all(v.get("torch") for v in seeds.values()):
            torch_states = {r: v["torch"] for r, v in seeds.items()}
            odd = _odd_ranks(torch_states)
            others = [
                name
                for name in ("python", "numpy")
                if all(name in v for v in seeds.values())
                and _odd_ranks({r: v[name] for r, v in seeds.items()})
            ]
            detail = (
                "the torch generator is in the same state on every rank when the model is wrapped"
                if not odd
                else f"the torch generator differs on {_ranks_text(odd)} when the model is wrapped"
            )
            if others:
                detail += f" ({' and '.join(others)} generators differ across ranks)"
            self.add("rank_seeds_identical", not odd, detail=detail)
        # Per batch fetch: each generator's state before and after (torch, python, numpy).
        fetches: dict[int, dict[tuple[int, int], tuple[list[str], list[str]]]] = {}
        for t in self.ranks:
            table = {}
            for r in t.steps.values():
                for i, entry in enumerate(r.get("rng") or []):
                    if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], list):
                        table[(r["s"], i)] = (entry[1], entry[2])
            fetches[t.rank] = table
        keys = set.intersection(*(set(v) for v in fetches.values())) if fetches else set()

        def drawn(key: tuple[int, int]) -> list[int]:
            """Generators that every rank advanced while fetching this batch."""
            return [
                g
                for g in range(3)
                if all(
                    len(fetches[r][key][0]) > g and fetches[r][key][0][g] != fetches[r][key][1][g]
                    for r in fetches
                )
            ]

        first = min((k[0] for k in keys), default=0)
        keys = {k for k in keys if k[0] != first or k[1] > 0}  # a sampler's seed draw comes first
        draws = {k: drawn(k) for k in keys}
        draws = {k: g for k, g in draws.items() if g}
        if not keys or len(draws) < max(2, len(keys) // 2):
            return
        same = [
            k
            for k, gens in draws.items()
            if all(len({fetches[r][k][1][g] for r in fetches}) == 1 for g in gens)
        ]
        identical = len(same) >= 0.9 * len(draws)
        at = min(same) if same else None
        self.add(
            "augmentation_rng_identical_across_ranks",
            identical,
            where=f"step {at[0]}" if identical and at else None,
            detail=f"the data pipeline drew random numbers in {len(draws)} batch fetches and every "
            f"rank's generators ended in the same state in {len(same)} of them"
            if identical
            else None,
        )

    # -- the loss curve ----------------------------------------------------------------------
    def losses(self) -> None:
        steps = self.common_steps
        per_rank = {t.rank: [_step_loss(t.steps[s]) for s in steps] for t in self.ranks}
        curve = []
        for i in range(len(steps)):
            present = [v for r in per_rank if (v := per_rank[r][i]) is not None]
            curve.append(sum(present) / len(present) if present else None)
        stats = []
        for r, values in sorted(per_rank.items()):
            finite = [v for v in values if v is not None and math.isfinite(v)]
            if len(finite) >= 2:
                stats.append(
                    f"rank {r}: mean {_fmt(statistics.fmean(finite))}, sd {_fmt(statistics.stdev(finite))}"
                )
        if len(self.ranks) >= 2 and len(steps) >= 3:
            equal = 0
            compared = 0
            for i in range(len(steps)):
                row = [per_rank[r][i] for r in per_rank]
                vals = [v for v in row if v is not None]
                if len(vals) < len(row):
                    continue
                compared += 1
                if all(abs(v - vals[0]) <= 1e-6 * max(1.0, abs(vals[0])) for v in vals):
                    equal += 1
            if compared >= 3:
                identical = equal >= 0.9 * compared
                self.add(
                    "rank_losses_identical",
                    identical,
                    detail=(f"identical at {equal} of {compared} steps; " if identical else "")
                    + "per-rank loss: "
                    + "; ".join(stats),
                )
        pattern, where, detail = _loss_pattern(steps, curve)
        if pattern:
            self.add("loss_pattern", pattern, where=where, detail=detail)
        if pattern == "spikes" and len(self.ranks) >= 2:
            single = self._single_rank_spike(steps, per_rank, _spike_indices(curve))
            self.add(
                "loss_spike_single_rank",
                single is not None,
                where=f"rank {single[0]} step {single[1]}" if single else None,
                detail=f"at the spike of step {single[1]} rank {single[0]}'s loss stands far above "
                "the others"
                if single
                else None,
            )

    @staticmethod
    def _single_rank_spike(
        steps: list[int], per_rank: dict[int, list[float | None]], spikes: list[int]
    ) -> tuple[int, int] | None:
        for i in spikes:
            vals = {r: x for r, v in per_rank.items() if (x := v[i]) is not None}
            for r, v in vals.items():
                others = [x for q, x in vals.items() if q != r]
                if others and v > 3 * max(statistics.median(others), 1e-12):
                    return r, steps[i]
        return None

    # -- what the user looks at --------------------------------------------------------------
    def logging(self) -> None:
        if not self.common_steps:
            return
        reads = {
            t.rank: sum(int(r.get("lread") or 0) for r in t.steps.values()) for t in self.ranks
        }
        reductions = sum(int(r.get("red") or 0) for t in self.ranks for r in t.steps.values())
        if reductions:
            self.add(
                "logs_rank0_only",
                False,
                detail=f"{reductions} small all-reduce/gather calls reduce metrics across ranks",
            )
        elif reads.get(self.r0.rank):
            others = [r for r, n in reads.items() if r != self.r0.rank and n]
            self.add(
                "logs_rank0_only",
                True,
                detail="the loss is read on "
                + ("every rank" if others else f"rank {self.r0.rank} only")
                + " and never reduced across ranks before it is logged",
            )


def _covers(ep: Record) -> bool:
    """An iteration that went over its whole shard (an epoch), not a peek such as
    ``next(iter(loader))``. Without a dataset length, a finished iteration counts."""
    if not ep.get("complete"):
        return False
    total = _positive(ep.get("dataset_len"))
    if total is None:
        return True
    replicas = _positive(ep.get("num_replicas"))
    share = math.ceil(total / replicas) if replicas else total
    batch = _positive(ep.get("bs")) or 1
    mod = _positive(ep.get("mod")) or 1
    seen = len(ep.get("indices") or []) * mod
    if mod > 1:  # a hash-selected subset: its size is an estimate
        return seen >= 0.9 * share
    return seen > share - batch  # drop_last leaves out fewer than one batch


def _positive(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else None


def _spike_indices(curve: list[float | None]) -> list[int]:
    out = []
    for i, v in enumerate(curve):
        if v is None or i < 3 or not math.isfinite(v):
            continue
        before = [x for x in curve[max(0, i - 5) : i] if x is not None and math.isfinite(x)]
        after = [x for x in curve[i + 1 : i + 6] if x is not None and math.isfinite(x)]
        if len(before) < 3 or len(after) < 2:
            continue
        base = statistics.median(before)
        if v > 2.5 * max(base, 1e-12) and v > 2.5 * max(statistics.median(after), 1e-12):
            out.append(i)
    return out


def _loss_pattern(
    steps: list[int], curve: list[float | None]
) -> tuple[str | None, str | None, str | None]:
    """A conservative reading of the loss curve: only nan, diverges or spikes, when clear."""
    values = [v for v in curve if v is not None]
    if len(values) < 8:
        return None, None, None
    bad = [steps[i] for i, v in enumerate(curve) if v is not None and not math.isfinite(v)]
    if bad:
        return (
            "nan",
            f"step {bad[0]}",
            f"the loss became {'NaN' if any(math.isnan(v) for v in values) else 'inf'} at step {bad[0]}",
        )
    q = max(2, len(values) // 4)
    head, tail = statistics.fmean(values[:q]), statistics.fmean(values[-q:])
    if tail > 2 * max(head, 1e-12) and values[-1] > values[len(values) // 2]:
        return "diverges", f"step {steps[-1]}", f"the loss grew from {_fmt(head)} to {_fmt(tail)}"
    spikes = _spike_indices(curve)
    if spikes:
        at = [steps[i] for i in spikes]
        shown = ", ".join(map(str, at[:8]))
        return "spikes", f"step {at[0]}", f"loss spikes at steps {shown}"
    return None, None, None
