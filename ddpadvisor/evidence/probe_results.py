"""Measured facts from the folder ``ddpadvisor probe`` (or a probe run by hand) wrote.

Layout: ``OUT/<probe>/rank<k>.json`` per probe and rank, ``OUT/status/rank<k>.json`` per rank,
``OUT/run*.json`` per launch (see probes/README.md). Every rank's record carries the
all-gathered comparison, so one readable file per probe is enough.

The folder may be damaged, interrupted or hostile. Every file is read with a size limit and
only when it is a regular file (never a FIFO or a device); a file that is not strict UTF-8
JSON, holds duplicate keys, non-finite or oversized numbers, an unknown format version, a rank
other than its name says, or fields of the wrong type is left out with a warning naming
file:line, and the rest of the evidence is kept. When nothing usable is left the reader raises
:class:`InputError` (exit 2). Warnings never quote a file's text, only its own record fields.

A probe that ran on its own stand-in (the built-in model, no --setup, the default sampler
settings) says nothing about the user's script when it passes, so only its failures become
facts then: a failure on a stand-in is still a failure of this environment.
Never imports torch.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpadvisor.bundled import probe_catalog
from ddpadvisor.errors import InputError
from ddpadvisor.evidence.sources.rankfiles import rank_files, rank_of
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.observation import Gathered, UnknownFact, observe
from ddpadvisor.yamlio import DuplicateKey, NotARegularFile, read_regular, unique_keys

FORMATS = (1, 2)  # record versions this reader understands (probes/_harness.py: FORMAT)
MAX_BYTES = 16 * 2**20  # one result file; the largest real ones are well under 1 MiB
MAX_WORLD = 1 << 20  # ranks; more is damage, not a job
MAX_DIGITS = 20  # an integer with more digits is damage
MAX_DEPTH = 64  # nesting of JSON containers
Records = dict[int, dict[str, Any]]

# Field -> accepted types of a result record (format 1 and 2).
FIELDS: dict[str, tuple[type, ...]] = {
    "format": (int,),
    "probe": (str,),
    "rank": (int,),
    "world_size": (int,),
    "status": (str,),
    "result": (dict,),
}
OPTIONAL: dict[str, tuple[type, ...]] = {
    "error": (str, type(None)),
    "subject": (str,),
    "summary": (str,),
    "seconds": (int, float),
    "host": (str,),
    "pid": (int,),
}


class Damaged(ValueError):
    """One file cannot be used: the message says why, ``line`` where (1-based)."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


class _Collector:
    """Observations and warnings for one folder, checked against the KB's fact types."""

    def __init__(self, kb: KnowledgeBase, folder: Path):
        self.kb = kb
        self.folder = folder
        self.out = Gathered()
        self.stand_ins: list[str] = []
        self.world = MAX_WORLD

    def fact(self, fact: str, value: Any, probe: str, rank: int | None, detail: str) -> None:
        if rank is not None and not (isinstance(rank, int) and 0 <= rank < self.world):
            raise Damaged(f"names rank {rank!r} outside the job's {self.world} ranks")
        where = f"probe {probe}" + (f" rank {rank}" if rank is not None else "")
        try:
            obs = observe(self.kb, fact, value, "probe", where, detail)
        except UnknownFact:
            return  # a KB without this fact cannot use it
        except ValueProblem as exc:
            self.warn(f"{self.folder / probe}: {exc}; ignored")
            return
        if obs is not None:
            self.out.observations.append(obs)

    def warn(self, text: str) -> None:
        self.out.warnings.append(text)


# ---------------------------------------------------------------- reading files


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, max(pos, 0)) + 1


def _line_of_key(text: str, key: str) -> int | None:
    found = text.find(json.dumps(key) + ":")
    return _line_at(text, found) if found >= 0 else None


def read_bounded(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; never opens a FIFO or device."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise Damaged(f"unreadable ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise Damaged("not a regular file (a FIFO, device, socket or folder)")
    if info.st_size > limit:
        raise Damaged(f"{info.st_size} bytes, over the {limit}-byte limit")
    try:
        data, longer = read_regular(path, limit)
    except NotARegularFile:
        raise Damaged("not a regular file (a FIFO, device, socket or folder)") from None
    except OSError as exc:
        raise Damaged(f"unreadable ({exc.strerror})") from None
    if longer:
        raise Damaged(f"over the {limit}-byte limit")
    return data


def _reject_constant(token: str) -> Any:
    raise Damaged(f"non-finite number {token}")


def _parse_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise Damaged("number out of range")
    return value


def _parse_int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_DIGITS:
        raise Damaged(f"integer of {len(token.lstrip('-'))} digits")
    return int(token)


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of containers, stopping at ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def parse_strict(raw: bytes) -> tuple[Any, str]:
    """(value, text) of strict JSON: UTF-8, no duplicate keys, finite numbers, bounded depth."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Damaged("not UTF-8 text", raw.count(b"\n", 0, exc.start) + 1) from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=unique_keys,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        raise Damaged(f"not valid JSON ({exc.msg}; truncated?)", exc.lineno) from None
    except DuplicateKey as exc:
        problem = f"duplicate key {json.dumps(exc.key)[:60]}"
        raise Damaged(problem, _first_bad_line(text, problem)) from None
    except RecursionError:
        raise Damaged(f"nested deeper than {MAX_DEPTH} levels") from None
    except Damaged as exc:
        raise Damaged(str(exc), _first_bad_line(text, str(exc))) from None
    if _depth(value) > MAX_DEPTH:
        raise Damaged(f"nested deeper than {MAX_DEPTH} levels")
    return value, text


def _first_bad_line(text: str, problem: str) -> int | None:
    """The line of the first token the strict parser refused (best effort, for the warning)."""
    if problem.startswith("duplicate key"):
        key = problem.split(" ", 2)[2]
        first = text.find(key + ":")
        second = text.find(key + ":", first + 1) if first >= 0 else -1
        return _line_at(text, second) if second >= 0 else None
    patterns = {
        "non-finite": r"(?<![\w\"])(NaN|-?Infinity)(?![\w\"])",
        "number out of range": r"-?\d+(\.\d+)?[eE][+-]?\d{3,}",
        "integer of": rf"-?\d{{{MAX_DIGITS + 1},}}",
    }
    for start, pattern in patterns.items():
        if problem.startswith(start):
            match = re.search(pattern, text)
            return _line_at(text, match.start()) if match else None
    return None


def _load(path: Path) -> tuple[dict[str, Any], str]:
    value, text = parse_strict(read_bounded(path))
    if not isinstance(value, dict):
        raise Damaged("not a probe result (expected a JSON object)", 1)
    return value, text


def _warn_damaged(col: _Collector, path: Path, exc: Damaged) -> None:
    where = f"{path}:{exc.line}" if exc.line else str(path)
    col.warn(f"{where}: {exc}; ignored")


def _check_record(data: dict[str, Any], text: str, probe: str, rank: int) -> None:
    """Raise :class:`Damaged` unless ``data`` is a whole record of ``probe`` by ``rank``."""
    for key, types in {**FIELDS, **OPTIONAL}.items():
        if key not in data:
            if key in FIELDS:
                raise Damaged(f"no {key!r} field (an incomplete record)", 1)
            continue
        value = data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise Damaged(f"field {key!r} has the wrong type", _line_of_key(text, key))
    line = _line_of_key
    if data["format"] not in FORMATS:
        known = ", ".join(map(str, FORMATS))
        raise Damaged(f"format {data['format']} (this reader knows {known})", line(text, "format"))
    if data["probe"] != probe:
        raise Damaged(f"a result of another probe, not {probe}", line(text, "probe"))
    if data["rank"] != rank:
        raise Damaged(
            f"says rank {data['rank']} but is the file of rank {rank} (a copy?)", line(text, "rank")
        )
    if not 1 <= data["world_size"] <= MAX_WORLD or rank >= data["world_size"]:
        raise Damaged(f"world size {data['world_size']} out of range", line(text, "world_size"))
    if data["status"] not in ("ok", "error"):
        raise Damaged("status is neither 'ok' nor 'error'", line(text, "status"))
    seconds = data.get("seconds", 0)
    if not 0 <= seconds <= 1e7:
        raise Damaged("seconds out of range", line(text, "seconds"))


def _rank_files(folder: Path, probe: str, col: _Collector) -> Records:
    records: Records = {}
    seen_pids: dict[tuple[Any, Any], int] = {}
    try:
        entries = sorted(os.scandir(folder / probe), key=lambda e: e.name)
    except OSError as exc:
        col.warn(f"{folder / probe}: unreadable ({exc.strerror}); ignored")
        return records
    for entry in entries:
        path = Path(entry.path)
        if entry.name.endswith(".tmp"):
            col.warn(f"{path}: a result left half-written (the run was interrupted?); ignored")
            continue
        rank = rank_of(entry.name, "json")
        if rank is None:
            continue
        try:
            data, text = _load(path)
            _check_record(data, text, probe, rank)
        except Damaged as exc:
            _warn_damaged(col, path, exc)
            continue
        key = (data.get("host"), data.get("pid"))
        if None not in key and key in seen_pids:
            col.warn(
                f"{path}:{_line_of_key(text, 'pid') or 1}: written by the same process as "
                f"rank{seen_pids[key]}.json (a copy?); ignored"
            )
            continue
        seen_pids[key] = rank
        records[rank] = data
    return records


def _world(records: Records, folder: Path, probe: str, col: _Collector) -> int:
    """The job's world size; ranks that disagree are warned about, the most common one wins."""
    sizes = [r["world_size"] for r in records.values()]
    world = max(set(sizes), key=sizes.count)
    for rank, rec in sorted(records.items()):
        if rec["world_size"] != world:
            col.warn(
                f"{folder / probe / f'rank{rank}.json'}: world size {rec['world_size']}, "
                f"other ranks say {world}; ignored"
            )
            del records[rank]
    return world


def _run_files(folder: Path, col: _Collector) -> bool:
    """Read run*.json; True when one was readable."""
    found = False
    for run_file in sorted(folder.glob("run*.json")):
        try:
            run, _ = _load(run_file)
        except Damaged as exc:
            _warn_damaged(col, run_file, exc)
            continue
        found = True
        message = run.get("message")
        message = message.splitlines()[0][:300] if isinstance(message, str) and message else None
        if run.get("failed") is True:
            col.out.failed = True
            col.warn(f"{run_file}: {message or 'the probe run failed'}")
        elif run.get("failed") is not False:
            col.warn(f"{run_file}: no 'failed' flag (an incomplete run record)")
        planned, done = run.get("probes"), run.get("probes_done")
        if isinstance(planned, list) and isinstance(done, list) and not run.get("failed"):
            left = [str(p)[:40] for p in planned if p not in done]
            if left:
                col.warn(f"{run_file}: the run ended before {', '.join(left[:6])} finished")
    return found


def _interrupted(folder: Path, col: _Collector) -> None:
    """Warn about ranks whose status file says they never finished (Ctrl-C, a kill)."""
    status = folder / "status"
    if not status.is_dir():
        return
    for _rank, path in rank_files(status, "json")[:64]:
        try:
            data, _ = _load(path)
        except Damaged as exc:
            _warn_damaged(col, path, exc)
            continue
        state = data.get("state")
        if state in ("starting", "running"):
            probe = data.get("probe")
            at = f" in probe {str(probe)[:40]}" if isinstance(probe, str) else ""
            col.warn(f"{path}: the rank stopped while {state}{at} (the run was interrupted?)")


# ---------------------------------------------------------------- helpers for details


def _ranks_text(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _tensors_text(diffs: list[dict[str, Any]], limit: int = 4) -> str:
    parts = []
    for d in diffs[:limit]:
        ranks = d.get("odd_ranks") or d.get("ranks") or []
        missing = ", missing there" if d.get("missing_on") else ""
        parts.append(f"{d.get('name')} ({_ranks_text(ranks)}{missing})")
    more = f" and {len(diffs) - limit} more" if len(diffs) > limit else ""
    return ", ".join(parts) + more


def _first_rank(diffs: list[dict[str, Any]]) -> int | None:
    for d in diffs:
        ranks = d.get("odd_ranks") or d.get("ranks") or []
        if ranks:
            return int(ranks[0])
    return None


def _result(rec: dict[str, Any]) -> dict[str, Any]:
    result = rec.get("result")
    return result if isinstance(result, dict) else {}


def _first(records: Records) -> tuple[int, dict[str, Any]]:
    rank = min(records)
    return rank, _result(records[rank])


def _user(records: Records) -> bool:
    return any(r.get("subject") == "user" for r in records.values())


# ---------------------------------------------------------------- per probe


def _env(records: Records, col: _Collector) -> None:
    rank0, res = _first(records)
    by_rank = {r: _result(rec) for r, rec in records.items()}
    versions = {r: (res_r.get("versions") or {}).get("torch") for r, res_r in by_rank.items()}
    torch_version = versions[rank0]
    if len(set(versions.values())) > 1:
        listed = ", ".join(f"rank {r}: {v}" for r, v in sorted(versions.items()))
        col.warn(f"probe env: ranks run different torch versions ({listed})")
    if torch_version:
        col.fact(
            "torch_version",
            torch_version,
            "env",
            rank0,
            f"torch {torch_version} (CUDA {(res.get('versions') or {}).get('cuda') or 'none'}, "
            f"NCCL {(res.get('versions') or {}).get('nccl') or 'none'}), backend "
            f"{res.get('backend')}",
        )
    world = res.get("world_size")
    if isinstance(world, int):
        hosts = res.get("hosts") or []
        col.fact("world_size", world, "env", None, f"{world} ranks on {len(hosts)} host(s)")

    algo_rank, algo_text = None, "unset"
    for r, res_r in sorted(by_rank.items()):
        settings = [
            f"{name}={res_r[key]}"
            for name, key in (("NCCL_ALGO", "nccl_algo"), ("NCCL_PROTO", "nccl_proto"))
            if res_r.get(key)
        ]
        if settings:
            algo_rank, algo_text = r, " ".join(settings)
            break
    col.fact(
        "nccl_algo",
        algo_text,
        "env",
        algo_rank,
        f"{algo_text} in the environment of rank {algo_rank}"
        if algo_rank is not None
        else "neither NCCL_ALGO nor NCCL_PROTO is set on any rank",
    )
    overriding = {r: res_r.get("nccl_overrides") or [] for r, res_r in by_rank.items()}
    with_overrides = [r for r, names in sorted(overriding.items()) if names]
    if with_overrides:
        r = with_overrides[0]
        detail = (
            f"{', '.join(overriding[r])} set on {_ranks_text(with_overrides)}: NCCL's "
            "debugging/tuning variables, not meant to stay set in production"
        )
        col.fact("nccl_env_overrides", True, "env", r, detail)
    else:
        col.fact("nccl_env_overrides", False, "env", None, "no NCCL tuning variable set")

    gpus: dict[int, dict[str, Any]] = {
        r: res_r["gpu"] for r, res_r in by_rank.items() if isinstance(res_r.get("gpu"), dict)
    }
    if gpus:
        first_rank = min(gpus)
        gpu = gpus[first_rank]
        names = sorted({str(g.get("name")) for g in gpus.values()})
        if len(names) > 1:
            col.warn(f"probe env: ranks use different GPU models ({', '.join(names)})")
        cap = "".join(str(x) for x in gpu.get("capability") or [])
        col.fact("gpu_model", gpu.get("name"), "env", first_rank, f"{gpu.get('name')} (sm{cap})")
        lacking = [r for r, g in sorted(gpus.items()) if not g.get("bf16_native")]
        if lacking:
            detail = f"no native bf16 on {_ranks_text(lacking)} ({gpus[lacking[0]].get('name')})"
            col.fact("gpu_supports_bf16", False, "env", lacking[0], detail)
        else:
            col.fact("gpu_supports_bf16", True, "env", None, f"native bf16 on every rank ({cap})")
    diffs = res.get("differences") or []
    if diffs:
        keys = ", ".join(str(d.get("key")) for d in diffs[:5])
        col.warn(f"probe env: settings differ between ranks: {keys}")


def _collective(records: Records, col: _Collector) -> None:
    failures: list[dict[str, Any]] = []
    seen = set()
    for rec in records.values():
        for f in _result(rec).get("failures") or []:
            key = (f.get("rank"), f.get("op"), f.get("dtype"), f.get("size"))
            if key not in seen:
                seen.add(key)
                failures.append(f)
    ok = not failures and all(_result(rec).get("ok") for rec in records.values())
    _, res = _first(records)
    if ok:
        sizes = res.get("sizes") or [0]
        skipped = res.get("skipped") or []
        note = f"; {len(skipped)} case(s) unsupported by this backend" if skipped else ""
        detail = (
            f"all {res.get('cases')} known-answer cases ({', '.join(res.get('ops') or [])}; "
            f"{', '.join(res.get('dtypes') or [])}; up to {max(sizes)} elements) correct on "
            f"every rank{note}"
        )
        col.fact("allreduce_correct", True, "collective", None, detail)
        return
    failures.sort(key=lambda f: (f.get("rank", 0), str(f.get("op")), f.get("size", 0)))
    by_rank: dict[int, list[str]] = {}
    for f in failures:
        by_rank.setdefault(int(f.get("rank", -1)), []).append(
            f"{f.get('op')} {f.get('dtype')} n={f.get('size')} (max error {f.get('max_abs_err')})"
        )
    parts = []
    for rank, cases in sorted(by_rank.items()):
        more = f" and {len(cases) - 2} more" if len(cases) > 2 else ""
        parts.append(f"rank {rank} got wrong results: " + ", ".join(cases[:2]) + more)
    worst = min(by_rank) if by_rank else None
    col.fact("allreduce_correct", False, "collective", worst, "; ".join(parts))


def _seeds(records: Records, col: _Collector) -> None:
    _, res = _first(records)
    identical = res.get("identical") or {}
    by_rank = res.get("by_rank") or {}
    differ = [s for s, same in identical.items() if not same]
    if not _user(records):
        col.stand_ins.append("seeds (pass --setup MODULE:FUNC with your seeding)")
        return
    if not differ:
        detail = f"after {res.get('setup')}: {', '.join(identical)} RNG identical on every rank"
        col.fact("rank_seeds_identical", True, "seeds", None, detail)
        return
    odd: int | None = None
    for stream in differ:
        values = by_rank.get(stream) or []
        odd = next((r for r, v in enumerate(values) if values and v != values[0]), odd)
        if odd is not None:
            break
    same = [s for s, v in identical.items() if v]
    detail = f"after {res.get('setup')}: {', '.join(differ)} RNG differs between ranks" + (
        f" ({', '.join(same)} identical)" if same else ""
    )
    col.fact("rank_seeds_identical", False, "seeds", odd, detail)


def _sampler(records: Records, col: _Collector) -> None:
    _, res = _first(records)
    user = _user(records)
    config = res.get("config") or {}
    overlap = bool(res.get("shards_overlap"))
    first_epoch = ((res.get("with_set_epoch") or {}).get("epochs") or [{}])[0]
    if user or overlap:
        pairs = first_epoch.get("overlap") or {}
        if overlap:
            pair = next(iter(pairs), None)
            shared = ", ".join(f"ranks {k}: {v}" for k, v in list(pairs.items())[:3])
            detail = (
                f"{first_epoch.get('excess_duplicates')} samples read by more than one rank "
                f"beyond padding ({shared}); coverage {first_epoch.get('coverage', 0):.0%}"
            )
            rank = int(pair.split("-")[1]) if pair else None
            col.fact("sampler_shards_overlap", True, "sampler", rank, detail)
        else:
            detail = (
                f"{config.get('dataset_size')} samples on {config.get('world_size')} ranks: "
                f"disjoint shards, {first_epoch.get('padding_duplicates', 0)} padding "
                f"duplicate(s), coverage {first_epoch.get('coverage', 0):.0%}"
            )
            col.fact("sampler_shards_overlap", False, "sampler", None, detail)
    repeats = res.get("order_repeats_across_epochs")
    if user and repeats is not None:
        calls = config.get("calls_set_epoch")
        detail = f"with set_epoch {'called' if calls == 'yes' else 'never called'}, epoch 2 " + (
            "repeats epoch 1's order on every rank" if repeats else "has a new order"
        )
        col.fact("sampler_order_repeats_across_epochs", bool(repeats), "sampler", None, detail)
    if not user:
        col.stand_ins.append("sampler (describe your sampler: --dataset-size, --seed, ...)")
    if res.get("equal_batches") is False:
        col.warn(
            "probe sampler: ranks get different numbers of batches per epoch "
            f"({res.get('batches_per_rank')}); DDP stalls at the end of the shorter epoch"
        )


def _checksums(records: Records, col: _Collector) -> None:
    _, res = _first(records)
    user = _user(records)
    stages = res.get("stages") or {}
    final = stages.get("after_steps") or stages.get("after_wrap") or {}
    after_wrap = stages.get("after_wrap") or {}
    params = final.get("params") or after_wrap.get("params") or []
    buffers = final.get("buffers") or after_wrap.get("buffers") or []
    stage = "after the synthetic steps" if stages.get("after_steps") else "after wrapping"
    model = res.get("model")
    steps = res.get("steps") or 0

    if params:
        detail = f"{model}: {len(params)} parameter(s) differ between ranks {stage}: "
        col.fact(
            "param_checksums_match",
            False,
            "checksums",
            _first_rank(params),
            detail + _tensors_text(params),
        )
    elif user:
        col.fact(
            "param_checksums_match",
            True,
            "checksums",
            None,
            f"{model}: every parameter identical on every rank after wrapping and {steps} steps",
        )
    if buffers:
        detail = f"{model}: {len(buffers)} buffer(s) differ between ranks {stage}: "
        col.fact(
            "buffer_checksums_match",
            False,
            "checksums",
            _first_rank(buffers),
            detail + _tensors_text(buffers),
        )
    elif user:
        col.fact(
            "buffer_checksums_match",
            True,
            "checksums",
            None,
            f"{model}: every buffer identical on every rank (as an evaluation forward sees them)",
        )
    grads = res.get("grad_diffs") or []
    if grads:
        step = grads[0].get("step")
        at_step = [g for g in grads if g.get("step") == step]
        detail = f"{model}: gradients differ after a synchronising backward at step {step}: "
        col.fact(
            "grads_match_after_sync",
            False,
            "checksums",
            _first_rank(at_step),
            detail + _tensors_text(at_step),
        )
    elif user and res.get("grads_match") is True:
        col.fact(
            "grads_match_after_sync",
            True,
            "checksums",
            None,
            f"{model}: gradients identical on every rank after each of {steps} backward passes",
        )
    missing = res.get("params_not_in_reducer") or []
    if missing or user:
        listed = ", ".join(missing[:4]) + (
            f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        )
        detail = (
            f"{model}: {len(missing)} trainable parameter(s) DDP never all-reduces "
            f"(added or unfrozen after wrapping): {listed}"
            if missing
            else f"{model}: DDP's reducer holds every trainable parameter"
        )
        col.fact("params_not_in_reducer", len(missing), "checksums", None, detail)
    if user and isinstance(res.get("has_batchnorm"), bool):
        has = res["has_batchnorm"]
        col.fact(
            "has_batchnorm",
            has,
            "checksums",
            None,
            f"{model} {'contains' if has else 'has no'} BatchNorm layers",
        )
    if not user and not (params or buffers or grads):
        col.stand_ins.append("checksums (pass --model MODULE:FACTORY)")


def _scaler(records: Records, col: _Collector) -> None:
    _, res = _first(records)
    user = _user(records)
    match = res.get("scaler_state_match")
    if match is False:
        steps = res.get("steps") or []
        first = (res.get("differing_steps") or [0])[0]
        row: dict[str, Any] = next((s for s in steps if s.get("step") == first), {})
        scales = row.get("scale") or []
        odd = next((r for r, v in enumerate(scales) if scales and v != scales[0]), None)
        skipped = row.get("skipped") or []
        if odd is None:
            odd = next((r for r, v in enumerate(skipped) if skipped and v != skipped[0]), None)
        detail = (
            f"{res.get('model')}: GradScaler state differs between ranks from step {first} "
            f"(scales {scales}, skipped {skipped})"
        )
        col.fact("scaler_state_match", False, "scaler", odd, detail)
    elif match is True and user:
        detail = (
            f"{res.get('model')}: scale and growth tracker identical on every rank; all ranks "
            f"skipped step(s) {res.get('skipped_steps')} after inf on rank {res.get('inf_rank')}"
        )
        col.fact("scaler_state_match", True, "scaler", None, detail)
    elif match is True:
        col.stand_ins.append("scaler (pass --model MODULE:FACTORY)")


HANDLERS: dict[str, Callable[[Records, _Collector], None]] = {
    "env": _env,
    "collective": _collective,
    "seeds": _seeds,
    "sampler": _sampler,
    "checksums": _checksums,
    "scaler": _scaler,
}
# Shape errors a handler meets in a record whose nested fields have the wrong types.
SHAPE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError)


# ---------------------------------------------------------------- entry point


def _missing_ranks(folder: Path, probe: str, records: Records, world: int, col: _Collector) -> None:
    missing = [r for r in range(min(world, MAX_WORLD)) if r not in records]
    if not missing:
        return
    listed = ", ".join(f"rank{r}.json" for r in missing[:4])
    more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
    col.warn(
        f"{folder / probe}: {listed}{more} missing or unusable; "
        f"probe {probe} used the other ranks' results"
    )


def _read_probe(folder: Path, probe: str, col: _Collector) -> bool:
    """Facts of one probe's folder; True when a usable record was found."""
    records = _rank_files(folder, probe, col)
    if not records:
        col.warn(f"{folder / probe}: no usable result")
        return False
    world = _world(records, folder, probe, col)
    col.world = world
    _missing_ranks(folder, probe, records, world, col)
    good: Records = {}
    for rank, rec in sorted(records.items()):
        if rec["status"] == "ok":
            good[rank] = rec
        else:
            col.out.failed = True
            error = str(rec.get("error") or "no result").splitlines() or ["no result"]
            col.warn(
                f"{folder / probe / f'rank{rank}.json'}: probe {probe} failed: {error[0][:300]}"
            )
    if good:
        kept, stand_ins = len(col.out.observations), len(col.stand_ins)
        try:
            HANDLERS[probe](good, col)
        except SHAPE_ERRORS as exc:
            del col.out.observations[kept:], col.stand_ins[stand_ins:]
            where = folder / probe / f"rank{min(good)}.json"
            line = f":{exc.line}" if isinstance(exc, Damaged) and exc.line else ""
            reason = str(exc) if isinstance(exc, Damaged) else type(exc).__name__
            col.warn(f"{where}{line}: result fields of unexpected shape ({reason}); ignored")
            return False
    return True


def read_probe_results(kb: KnowledgeBase, folder: Path) -> Gathered:
    """Observations (source "probe") from one results folder; damaged files become warnings.

    Raises :class:`InputError` when the folder is missing or nothing usable is in it.
    """
    folder = Path(folder)
    if not folder.exists():
        raise InputError("probe results folder does not exist", folder)
    if not folder.is_dir():
        raise InputError("--probe-results expects the folder 'ddpadvisor probe' wrote", folder)
    col = _Collector(kb, folder)
    has_run = _run_files(folder, col)
    usable = False
    present = [p for p in probe_catalog() if (folder / p).is_dir()]
    for probe in present:
        usable = _read_probe(folder, probe, col) or usable
    if not usable and not col.out.failed:
        problems = "; ".join(col.out.warnings[:3])
        if has_run or present:
            raise InputError(
                "no usable probe result here" + (f" ({problems})" if problems else ""), folder
            )
        raise InputError(
            "no probe results here (expected run.json or <probe>/rank<k>.json)", folder
        )
    if has_run and not present:
        col.warn(f"{folder}: run.json is here but no <probe>/ folder (deleted?)")
    _interrupted(folder, col)
    if col.stand_ins:
        col.warn(
            "passing probes that ran on stand-ins are not evidence about your training: "
            + "; ".join(col.stand_ins)
        )
    if not col.out.observations and not col.out.warnings:
        col.warn(f"{folder}: the probe results gave no measured fact")
    return col.out
