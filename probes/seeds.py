"""Probe `seeds`: are the random number generators seeded the same way on every rank?

Each rank runs the user's seeding (``--setup MODULE:FUNC``, called as FUNC() or FUNC(rank)),
then fingerprints the python, numpy, torch and CUDA RNG states. The fingerprints are compared
across ranks and each outcome is explained: identical torch state is what parameters created
outside DDP's initial broadcast need; distinct augmentation streams per rank are fine.

Without --setup it fingerprints the state a fresh process has (torch's fixed default seed,
python and numpy seeded from the OS), which says nothing about the user's script.

Run alone: ``torchrun --nproc_per_node N seeds.py --out DIR [--setup mymod:seed_all]``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import random
import socket
import sys
import time
import traceback
import types
from typing import Any

NAME = "seeds"

CONSEQUENCES = {
    ("torch", True): (
        "torch RNG identical on every rank: parameters created from it start equal on every "
        "rank, including any created after DDP wraps the model (adapters, new heads); dropout "
        "masks also match across ranks, which is harmless."
    ),
    ("torch", False): (
        "torch RNG differs between ranks: harmless for parameters that exist when DDP wraps "
        "the model (DDP copies rank 0's to every rank), but anything created after wrapping "
        "starts different on each rank and those replicas drift apart."
    ),
    ("cuda", True): "CUDA RNG identical on every rank (dropout masks on GPU match across ranks).",
    ("cuda", False): (
        "CUDA RNG differs between ranks: fine for dropout; parameters initialised on the GPU "
        "after wrapping would start different on each rank."
    ),
    ("python", True): (
        "python RNG identical on every rank: augmentation drawn from it makes the same random "
        "choices on every rank (each rank still reads different samples), so the global batch "
        "is less diverse."
    ),
    ("python", False): (
        "python RNG differs between ranks: fine for augmentation; nothing that must agree across "
        "ranks (which layers to freeze, a shuffle done without DistributedSampler) may use it."
    ),
    ("numpy", True): (
        "numpy RNG identical on every rank: augmentation drawn from it repeats the same choices "
        "on every rank, so the global batch is less diverse."
    ),
    ("numpy", False): (
        "numpy RNG differs between ranks: fine for augmentation; nothing that must agree across "
        "ranks may use it."
    ),
}
WORKERS_NOTE = (
    "DataLoader workers seed themselves from the main process's torch RNG, so identical torch "
    "state also gives identical worker augmentation on every rank unless worker_init_fn or the "
    "loader's generator mixes in the rank."
)


def add_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("seeds probe")
    group.add_argument(
        "--setup",
        default=None,
        metavar="MODULE:FUNC",
        help="the training script's seeding function, called as FUNC() or FUNC(rank)",
    )


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def rng_fingerprints() -> dict[str, str]:
    """Short hashes of this process's RNG states: python, numpy (if installed), torch, cuda."""
    import torch

    out = {"python": _digest(repr(random.getstate()).encode())}
    try:
        import numpy as np

        state = np.random.get_state()
        out["numpy"] = _digest(state[1].tobytes() + repr(state[2:]).encode())
    except ImportError:
        pass
    out["torch"] = _digest(bytes(torch.get_rng_state().tolist()))
    if torch.cuda.is_available():
        out["cuda"] = _digest(bytes(torch.cuda.get_rng_state().tolist()))
    return out


def run_setup(spec: str, rank: int) -> None:
    func = load_object(spec)
    required = [
        p
        for p in inspect.signature(func).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    func(rank) if required else func()


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    if args.setup:
        run_setup(args.setup, ctx.rank)
    mine = rng_fingerprints()
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, mine)
    streams = sorted({s for g in gathered for s in g})
    by_rank = {s: [g.get(s) for g in gathered] for s in streams}
    identical = {s: len(set(values)) == 1 for s, values in by_rank.items()}
    consequences = [CONSEQUENCES[(s, same)] for s, same in identical.items()]
    if identical.get("torch"):
        consequences.append(WORKERS_NOTE)
    differ = [s for s, same in identical.items() if not same]
    summary = (
        ("after " + args.setup if args.setup else "without --setup (fresh-process state)")
        + ": "
        + (
            "all RNG streams identical on every rank"
            if not differ
            else "differ: " + ", ".join(differ)
        )
    )
    return {
        "summary": summary,
        "subject": "user" if args.setup else "builtin",
        "setup": args.setup,
        "fingerprints": mine,
        "torch_initial_seed": int(torch.initial_seed()),
        "by_rank": by_rank,
        "identical": identical,
        "all_identical": not differ,
        "consequences": consequences,
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
