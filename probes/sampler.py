"""Probe `sampler`: how DistributedSampler splits the data between ranks and epochs.

Every rank builds its sampler the way the training script does and draws two epochs of
indices, once calling ``set_epoch`` and once without. The indices are all-gathered and
compared: overlap between ranks (beyond DistributedSampler's padding of fewer than world-size
samples), coverage of the dataset, batches per rank, and whether epoch 2 repeats epoch 1.

Describe the script's sampler with --dataset-size, --batch-size, --seed (with --seed-per-rank
if the script passes seed + rank), --no-shuffle and --drop-last, or pass
``--dataset MODULE:FACTORY`` where FACTORY() returns a map-style dataset, a sampler or a
DataLoader (it may call torch.distributed.get_rank()). --calls-set-epoch says whether the
training loop calls set_epoch, which decides which of the two epoch orders applies.

Run alone: ``torchrun --nproc_per_node N sampler.py --out DIR --dataset-size 103``.
Importable: ``shard_report(indices_per_rank, dataset_len)``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import importlib.util
import json
import os
import socket
import sys
import time
import traceback
import types
from collections import Counter
from typing import Any

NAME = "sampler"
DEFAULTS = {"dataset_size": 103, "batch_size": 4, "seed": 0}


def add_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sampler probe (what the training script does)")
    group.add_argument("--dataset", default=None, metavar="MODULE:FACTORY")
    group.add_argument("--dataset-size", type=int, default=None, help="default 103")
    group.add_argument("--batch-size", type=int, default=None, help="per rank, default 4")
    group.add_argument("--seed", type=int, default=None, help="DistributedSampler seed, default 0")
    group.add_argument("--seed-per-rank", action="store_true", help="the script passes seed+rank")
    group.add_argument("--no-shuffle", action="store_true")
    group.add_argument("--drop-last", action="store_true")
    group.add_argument("--calls-set-epoch", choices=("yes", "no"), default=None)


def shard_report(indices_per_rank: list[list[int]], dataset_len: int) -> dict[str, Any]:
    """Overlap, coverage and duplicates of one epoch's indices across ranks.

    ``overlap`` maps "i-j" to the number of distinct indices ranks i and j share (pairs with
    none are left out). ``padding_duplicates`` are the repeats DistributedSampler adds to even
    out the shards (fewer than the world size); ``excess_duplicates`` are all other repeats:
    any means ranks read the same samples.
    """
    world = len(indices_per_rank)
    holders: dict[int, set[int]] = {}
    for rank, indices in enumerate(indices_per_rank):
        for index in indices:
            holders.setdefault(int(index), set()).add(rank)
    pairs: Counter[str] = Counter()
    for ranks in holders.values():
        if len(ranks) > 1:
            ordered = sorted(ranks)
            for a_pos, a in enumerate(ordered):
                for b in ordered[a_pos + 1 :]:
                    pairs[f"{a}-{b}"] += 1
    total = sum(len(indices) for indices in indices_per_rank)
    unique = len(holders)
    duplicates = total - unique
    padding = min(duplicates, max(0, total - dataset_len), max(0, world - 1))
    covered = sum(1 for i in holders if 0 <= i < dataset_len)
    return {
        "overlap": dict(sorted(pairs.items())),
        "coverage": covered / dataset_len if dataset_len else 1.0,
        "padding_duplicates": padding,
        "duplicates": duplicates,
        "excess_duplicates": duplicates - padding,
        "per_rank": [len(indices) for indices in indices_per_rank],
        "unique": unique,
    }


class _Indexable:
    """A stand-in map-style dataset of the given size (only its length matters)."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


def _build(args: argparse.Namespace, ctx: types.SimpleNamespace) -> tuple[Any, Any, int]:
    """(sampler or DataLoader, object to call set_epoch on, dataset length)."""
    from torch.utils.data import DataLoader, DistributedSampler, Sampler

    shuffle = not args.no_shuffle
    seed = DEFAULTS["seed"] if args.seed is None else args.seed
    if args.seed_per_rank:
        seed += ctx.rank
    if args.dataset:
        made = load_object(args.dataset)()
        if isinstance(made, DataLoader):
            return made, made.sampler, len(made.dataset)  # type: ignore[arg-type]
        if isinstance(made, Sampler):
            dataset = getattr(made, "dataset", None)
            size = len(dataset) if dataset is not None else len(made)  # type: ignore[arg-type]
            return made, made, size
        dataset = made
    else:
        size = DEFAULTS["dataset_size"] if args.dataset_size is None else args.dataset_size
        dataset = _Indexable(size)
    sampler = DistributedSampler(
        dataset,
        num_replicas=ctx.world_size,
        rank=ctx.rank,
        shuffle=shuffle,
        seed=seed,
        drop_last=args.drop_last,
    )
    return sampler, sampler, len(dataset)


def _draw(source: Any) -> list[int]:
    """One epoch of indices, flattened from batches when the source yields batches."""
    from torch.utils.data import DataLoader

    if isinstance(source, DataLoader):
        batches = source.batch_sampler if source.batch_sampler is not None else source.sampler
        out: list[int] = []
        for item in batches:  # type: ignore[union-attr]
            out.extend(int(i) for i in (item if isinstance(item, (list, tuple)) else [item]))
        return out
    return [int(i) for i in source]


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:
    import torch.distributed as dist

    source, epoch_target, size = _build(args, ctx)
    batch = DEFAULTS["batch_size"] if args.batch_size is None else args.batch_size
    draws: dict[str, list[list[int]]] = {}
    for variant in ("with_set_epoch", "without_set_epoch"):
        epochs = []
        for epoch in range(2):
            if variant == "with_set_epoch" and hasattr(epoch_target, "set_epoch"):
                epoch_target.set_epoch(epoch)
            elif hasattr(epoch_target, "set_epoch"):
                epoch_target.set_epoch(0)  # never advanced: what a loop without set_epoch sees
            epochs.append(_draw(source))
        draws[variant] = epochs
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, draws)

    report: dict[str, Any] = {}
    for variant in draws:
        per_epoch = [shard_report([g[variant][e] for g in gathered], size) for e in range(2)]
        repeats = all(g[variant][0] == g[variant][1] for g in gathered)
        report[variant] = {"epochs": per_epoch, "order_repeats": repeats}
    first = report["with_set_epoch"]["epochs"][0]
    counts = first["per_rank"]
    steps = [(n // batch if args.drop_last else -(-n // batch)) for n in counts]
    overlap = first["excess_duplicates"] > 0
    given = [
        args.dataset,
        args.dataset_size,
        args.batch_size,
        args.seed,
        args.seed_per_rank or None,
        args.no_shuffle or None,
        args.drop_last or None,
        args.calls_set_epoch,
    ]
    chosen = None
    if args.calls_set_epoch:
        variant = "with_set_epoch" if args.calls_set_epoch == "yes" else "without_set_epoch"
        chosen = report[variant]["order_repeats"]
    summary = (
        f"{size} samples on {ctx.world_size} ranks: "
        + (
            f"ranks SHARE {first['excess_duplicates']} samples beyond padding"
            if overlap
            else "disjoint shards"
        )
        + f", coverage {first['coverage']:.0%}, {first['padding_duplicates']} padding duplicate(s)"
        + "; epoch 2 repeats epoch 1: "
        + f"with set_epoch {'yes' if report['with_set_epoch']['order_repeats'] else 'no'}, "
        + f"without {'yes' if report['without_set_epoch']['order_repeats'] else 'no'}"
    )
    return {
        "summary": summary,
        "subject": "user" if any(v is not None for v in given) else "builtin",
        "config": {
            "dataset": args.dataset,
            "dataset_size": size,
            "batch_size": batch,
            "seed": DEFAULTS["seed"] if args.seed is None else args.seed,
            "seed_per_rank": args.seed_per_rank,
            "shuffle": not args.no_shuffle,
            "drop_last": args.drop_last,
            "calls_set_epoch": args.calls_set_epoch,
            "world_size": ctx.world_size,
        },
        "with_set_epoch": report["with_set_epoch"],
        "without_set_epoch": report["without_set_epoch"],
        "shards_overlap": overlap,
        "coverage": first["coverage"],
        "batches_per_rank": steps,
        "equal_batches": len(set(steps)) == 1,
        "order_repeats_across_epochs": chosen,
    }


# >>> harness >>>
# The same text sits at the end of every probe file (tests/test_probes_static.py checks it),
# so that each file runs alone under torchrun or srun with nothing but torch installed.
# run_all.py drives several probes through it in one launch.

FORMAT = 1
FAULT_ENV = "DDPADVISOR_PROBE_FAULT"  # test-only fault injection, see probes/README.md
ORIGINAL_ENV = dict(os.environ)  # before the harness adds anything


def fault_for(probe: str, rank: int) -> str | None:
    """Injected fault for this probe and rank, from ``KIND:rank=R[:probe=NAME]`` (tests only)."""
    kind, *options = os.environ.get(FAULT_ENV, "").split(":")
    fields = dict(opt.split("=", 1) for opt in options if "=" in opt)
    if not kind or fields.get("rank", str(rank)) != str(rank):
        return None
    return kind if fields.get("probe", probe) == probe else None


def load_object(spec: str) -> Any:
    """Import ``MODULE:NAME`` or ``path/to/file.py:NAME``, relative to the working folder."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise ValueError(f"expected MODULE:NAME, got {spec!r}")
    if module_name.endswith(".py"):
        loader_spec = importlib.util.spec_from_file_location(
            os.path.basename(module_name)[:-3], module_name
        )
        if loader_spec is None or loader_spec.loader is None:
            raise ImportError(f"cannot load {module_name}")
        module = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def write_json(path: str, data: dict[str, Any]) -> None:
    """Write atomically: a reader sees the whole file or none of it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(tmp, path)


def set_status(out: str, rank: int, state: str, probe: str | None = None, **extra: Any) -> None:
    record = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "state": state}
    write_json(
        os.path.join(out, "status", f"rank{rank}.json"),
        {**record, "probe": probe, "time": time.time(), **extra},
    )


def init_distributed(backend: str, timeout: float) -> types.SimpleNamespace:
    """Join the job started by torchrun or srun, or form a job of one when run directly."""
    import torch
    import torch.distributed as dist

    env = os.environ
    if "RANK" not in env and "SLURM_PROCID" in env:  # srun without torchrun
        if "MASTER_ADDR" not in env:
            raise RuntimeError("under srun, export MASTER_ADDR=<first node> (and MASTER_PORT)")
        env.update(RANK=env["SLURM_PROCID"], WORLD_SIZE=env["SLURM_NTASKS"])
        env.setdefault("LOCAL_RANK", env.get("SLURM_LOCALID", "0"))
        if env.get("SLURM_NTASKS_PER_NODE", "").isdigit():
            env.setdefault("LOCAL_WORLD_SIZE", env["SLURM_NTASKS_PER_NODE"])
        env.setdefault("MASTER_PORT", "29500")
    elif "RANK" not in env:  # plain `python probe.py`
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            env["MASTER_PORT"] = str(sock.getsockname()[1])
    local_rank = int(env.get("LOCAL_RANK", "0"))
    if backend == "auto":
        cuda_ok = torch.cuda.is_available() and torch.cuda.device_count() > local_rank
        backend = "nccl" if cuda_ok else "gloo"
    device = torch.device("cpu")
    kwargs: dict[str, Any] = {"timeout": datetime.timedelta(seconds=timeout)}
    if backend == "nccl":
        if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise RuntimeError(f"nccl needs a GPU for local rank {local_rank}; {count} visible")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        env.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")  # a timeout raises instead of aborting
        kwargs["device_id"] = device
    try:
        dist.init_process_group(backend, **kwargs)
    except TypeError:  # torch without device_id
        kwargs.pop("device_id", None)
        dist.init_process_group(backend, **kwargs)
    # A gloo group gives monitored_barrier, which names the ranks that never arrive.
    monitor = (
        None if backend == "gloo" else dist.new_group(backend="gloo", timeout=kwargs["timeout"])
    )
    return types.SimpleNamespace(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local_rank,
        local_world_size=int(env.get("LOCAL_WORLD_SIZE", "1")),
        backend=backend,
        device=device,
        timeout=timeout,
        monitor_group=monitor,
    )


def probe_main(modules: list[types.ModuleType], argv: list[str] | None = None) -> int:
    """Run the probes in order; each rank writes OUT/<probe>/rank<k>.json."""
    parser = argparse.ArgumentParser(
        description="ddpadvisor probes: " + ", ".join(m.NAME for m in modules),
        conflict_handler="resolve",
    )
    parser.add_argument("--out", default="probe-results", help="folder for the results")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a collective waits")
    for module in modules:
        module.add_args(parser)
    args = parser.parse_args(argv)
    # As a script, this folder comes first on sys.path, where names such as `env` or `sampler`
    # would shadow the user's modules; probes load each other by path instead.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    set_status(args.out, rank, "starting")
    try:
        ctx = init_distributed(args.backend, args.timeout)
    except Exception as exc:
        set_status(args.out, rank, "failed", error=f"init: {type(exc).__name__}: {exc}")
        raise
    import torch.distributed as dist

    for module in modules:
        set_status(args.out, ctx.rank, "running", module.NAME)
        started = time.perf_counter()
        result: dict[str, Any] = {}
        error = trace = None
        try:
            if ctx.world_size > 1:
                dist.monitored_barrier(
                    group=ctx.monitor_group,
                    timeout=datetime.timedelta(seconds=ctx.timeout),
                    wait_all_ranks=True,
                )
            fault = fault_for(module.NAME, ctx.rank)
            while fault == "hang":
                time.sleep(1.0)
            if fault == "crash":
                os._exit(86)
            if fault == "raise":
                raise RuntimeError(f"injected fault ({FAULT_ENV})")
            result = module.run(args, ctx)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}".strip()
            trace = traceback.format_exc()
        record = {
            "format": FORMAT,
            "probe": module.NAME,
            "rank": ctx.rank,
            "world_size": ctx.world_size,
            "local_rank": ctx.local_rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "backend": ctx.backend,
            "device": str(ctx.device),
            "seconds": round(time.perf_counter() - started, 4),
            "status": "error" if error else "ok",
            "error": error,
            "traceback": trace,
            "subject": result.pop("subject", "builtin"),
            "summary": result.pop("summary", ""),
            "result": result,
        }
        write_json(os.path.join(args.out, module.NAME, f"rank{ctx.rank}.json"), record)
        if error:
            set_status(args.out, ctx.rank, "failed", module.NAME, error=error)
            sys.stderr.write(f"[rank{ctx.rank}] probe {module.NAME} failed: {trace}")
            sys.stderr.flush()
            os._exit(1)  # peers may wait in a collective; torchrun stops them
    set_status(args.out, ctx.rank, "done")
    # No DDP model may outlive the group (gloo can abort at exit). Probes delete theirs and
    # DDP holds no reference cycles, so a cheap young-generation pass is enough here.
    gc.collect(1)
    dist.destroy_process_group()
    # Everything is written. Skip the interpreter's teardown, which takes seconds once DDP has
    # pulled in torch._dynamo, and would only free memory.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(probe_main([sys.modules[__name__]]))
# <<< harness <<<
