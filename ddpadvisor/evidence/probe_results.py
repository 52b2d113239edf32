"""Measured facts from the folder ``ddpadvisor probe`` (or a probe run by hand) wrote.

Layout: ``OUT/<probe>/rank<k>.json`` per probe and rank, ``OUT/run*.json`` per launch (see
probes/README.md). Every rank's record carries the all-gathered comparison, so one readable
file per probe is enough; missing or unreadable files become warnings naming the file.

A probe that ran on its own stand-in (the built-in model, no --setup, the default sampler
settings) says nothing about the user's script when it passes, so only its failures become
facts then: a failure on a stand-in is still a failure of this environment.
Never imports torch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpadvisor.errors import InputError
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.observation import Gathered, UnknownFact, observe

PROBE_NAMES = ("env", "collective", "seeds", "sampler", "checksums", "scaler")
Records = dict[int, dict[str, Any]]


class _Collector:
    """Observations and warnings for one folder, checked against the KB's fact types."""

    def __init__(self, kb: KnowledgeBase, folder: Path):
        self.kb = kb
        self.folder = folder
        self.out = Gathered()
        self.stand_ins: list[str] = []

    def fact(self, fact: str, value: Any, probe: str, rank: int | None, detail: str) -> None:
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


def _load_json(path: Path, col: _Collector) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        col.warn(f"{path}: unreadable ({exc.strerror}); ignored")
        return None
    except json.JSONDecodeError as exc:
        col.warn(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}; truncated?); ignored")
        return None
    if not isinstance(data, dict):
        col.warn(f"{path}: not a probe result (expected a JSON object); ignored")
        return None
    return data


def _rank_files(folder: Path, probe: str, col: _Collector) -> Records:
    records: Records = {}
    for path in sorted((folder / probe).glob("rank*.json")):
        suffix = path.stem[len("rank") :]
        if not suffix.isdigit():
            continue
        data = _load_json(path, col)
        if data is None:
            continue
        if data.get("probe") not in (None, probe) or not isinstance(data.get("rank"), int):
            col.warn(f"{path}: not a result of probe {probe}; ignored")
            continue
        records[int(suffix)] = data
    return records


def _world(records: Records) -> int:
    sizes = [r.get("world_size") for r in records.values()]
    return max([s for s in sizes if isinstance(s, int)] + [max(records) + 1])


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


# ---------------------------------------------------------------- entry point


def read_probe_results(kb: KnowledgeBase, folder: Path) -> Gathered:
    """Observations (source "probe") from one results folder; warnings never stop it."""
    folder = Path(folder)
    if not folder.exists():
        raise InputError("probe results folder does not exist", folder)
    if not folder.is_dir():
        raise InputError("--probe-results expects the folder 'ddpadvisor probe' wrote", folder)
    col = _Collector(kb, folder)
    found = False
    for run_file in sorted(folder.glob("run*.json")):
        run = _load_json(run_file, col)
        if run is None:
            continue
        found = True
        if run.get("failed"):
            col.out.failed = True
            col.warn(f"{run_file}: {run.get('message') or 'the probe run failed'}")
    for probe in PROBE_NAMES:
        if not (folder / probe).is_dir():
            continue
        records = _rank_files(folder, probe, col)
        if not records:
            col.warn(f"{folder / probe}: no readable result")
            continue
        found = True
        world = _world(records)
        for rank in range(world):
            if rank not in records and not (folder / probe / f"rank{rank}.json").exists():
                col.warn(
                    f"{folder / probe / f'rank{rank}.json'}: missing; "
                    f"probe {probe} used the other ranks' results"
                )
        good: Records = {}
        for rank, rec in sorted(records.items()):
            if rec.get("status") == "ok" and isinstance(rec.get("result"), dict):
                good[rank] = rec
            else:
                col.out.failed = True
                error = str(rec.get("error") or "no result").splitlines()[0]
                col.warn(f"{folder / probe / f'rank{rank}.json'}: probe {probe} failed: {error}")
        if good:
            HANDLERS[probe](good, col)
    if not found:
        raise InputError(
            "no probe results here (expected run.json or <probe>/rank<k>.json)", folder
        )
    if col.stand_ins:
        col.warn(
            "passing probes that ran on stand-ins are not evidence about your training: "
            + "; ".join(col.stand_ins)
        )
    return col.out
