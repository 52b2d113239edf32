"""What every probe shares: options, joining the job, status and result files, fault injection.

Each probe file puts its own folder on ``sys.path`` for one moment and imports this module, so
a probe needs this file beside it (copy the whole ``probes/`` folder to a node). Nothing here
imports anything but the standard library and torch; numpy is never needed.

    torchrun --nproc_per_node N <probe>.py --out DIR      # one probe
    torchrun --nproc_per_node N run_all.py --out DIR      # the probes of catalog.json, in order
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib
import importlib.util
import json
import os
import socket
import sys
import threading
import time
import traceback
import types
from typing import Any

# Version of the result records (<probe>/rank<k>.json). ddpadvisor's reader checks it.
FORMAT = 2  # 2: strict JSON (non-finite floats as strings), "started" time per record
PREFETCH_ENV = "DDPADVISOR_PROBE_PREFETCH"  # "0": no background import (for measurements)
FAULT_ENV = "DDPADVISOR_PROBE_FAULT"  # test-only fault injection, see probes/README.md
ORIGINAL_ENV = dict(os.environ)  # before the harness adds anything
HERE = os.path.dirname(os.path.abspath(__file__))


def catalog() -> list[str]:
    """The probe names of catalog.json, in run order (the one list of probes)."""
    with open(os.path.join(HERE, "catalog.json"), encoding="utf-8") as fh:
        return [str(entry["name"]) for entry in json.load(fh)["probes"]]


def load_probe(name: str) -> types.ModuleType:
    """A probe file of this folder, loaded by path under a private module name.

    Probes never import each other by their plain names, which would shadow the user's modules
    called ``env`` or ``sampler``.
    """
    key = f"ddpadvisor_probe_{name}"
    if key not in sys.modules:
        path = os.path.join(HERE, f"{name}.py")
        if not os.path.isfile(path):
            raise RuntimeError(f"probe {name!r} needs {name}.py in {HERE}")
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None:
            raise ImportError(path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


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


def all_gather_json(obj: Any, world_size: int, group: Any = None) -> list[Any]:
    """Every rank's ``obj`` (JSON-able), in rank order; a collective.

    ``torch.distributed.all_gather_object`` turns the received bytes back with
    ``tensor.numpy()`` and so fails where numpy is missing; JSON in a uint8 tensor does not
    (and never unpickles what a peer sent). Tuples come back as lists.
    """
    import torch
    import torch.distributed as dist

    backend = str(dist.get_backend(group))
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else None
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world_size)]
    dist.all_gather(sizes, size, group=group)
    longest = max(int(s.item()) for s in sizes)
    mine = torch.zeros(longest, dtype=torch.uint8)
    if data:
        mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    mine = mine.to(device) if device is not None else mine
    received = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(received, mine, group=group)
    return [
        json.loads(bytes(t[: int(n.item())].cpu().tolist()).decode("utf-8"))
        for t, n in zip(received, sizes)
    ]


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float written as the string "nan", "inf" or "-inf".

    Result files are strict JSON (no NaN/Infinity tokens), so that a reader can reject every
    non-finite number as damage; a probe that measured one says so in words.
    """
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_json(path: str, data: dict[str, Any]) -> None:
    """Write atomically: a reader sees the whole file or none of it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(finite(data), fh, indent=1, default=str, allow_nan=False)
    os.replace(tmp, path)


def set_status(out: str, rank: int, state: str, probe: str | None = None, **extra: Any) -> None:
    record = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "state": state}
    write_json(
        os.path.join(out, "status", f"rank{rank}.json"),
        {**record, "probe": probe, "time": time.time(), **extra},
    )


def _fill_env_from_slurm_or_nothing(env: Any) -> None:
    """Under srun without torchrun take SLURM's ranks; run directly, form a job of one."""
    if "RANK" not in env and "SLURM_PROCID" in env:
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


def init_distributed(backend: str, timeout: float) -> types.SimpleNamespace:
    """Join the job started by torchrun or srun, or form a job of one when run directly."""
    import torch
    import torch.distributed as dist

    env = os.environ
    _fill_env_from_slurm_or_nothing(env)
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


def prefetch_ddp_imports(modules: list[types.ModuleType]) -> threading.Thread | None:
    """Import torch._dynamo in the background while the probes before the first DDP one run.

    DistributedDataParallel's constructor imports torch._dynamo (seconds); the probes that run
    first (env, collective, ...) mostly wait on sockets, so the import overlaps them. The
    probe that builds DDP simply waits for the import when it gets there first.
    """
    uses = [bool(getattr(m, "USES_DDP", False)) for m in modules]
    if os.environ.get(PREFETCH_ENV, "1") == "0" or not any(uses) or uses[0]:
        return None

    def work() -> None:
        with contextlib.suppress(Exception):  # the probe that needs it reports the failure
            importlib.import_module("torch._dynamo")

    thread = threading.Thread(target=work, name="ddpadvisor-prefetch", daemon=True)
    thread.start()
    return thread


def _parse(modules: list[types.ModuleType], argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="ddpadvisor probes: " + ", ".join(m.NAME for m in modules),
        conflict_handler="resolve",
    )
    parser.add_argument("--out", default="probe-results", help="folder for the results")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a collective waits")
    for module in modules:
        module.add_args(parser)
    return parser.parse_args(argv)


def _run_one(module: types.ModuleType, args: argparse.Namespace, ctx: Any) -> dict[str, Any]:
    """One probe on this rank: its result record, status "ok" or "error"."""
    import torch.distributed as dist

    started_at, started = time.time(), time.perf_counter()
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
    return {
        "format": FORMAT,
        "probe": module.NAME,
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "local_rank": ctx.local_rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "backend": ctx.backend,
        "device": str(ctx.device),
        "started": round(started_at, 4),
        "seconds": round(time.perf_counter() - started, 4),
        "status": "error" if error else "ok",
        "error": error,
        "traceback": trace,
        "subject": result.pop("subject", "builtin"),
        "summary": result.pop("summary", ""),
        "result": result,
    }


def probe_main(modules: list[types.ModuleType], argv: list[str] | None = None) -> int:
    """Run the probes in order; each rank writes OUT/<probe>/rank<k>.json."""
    args = _parse(modules, argv)
    # As a script, this folder comes first on sys.path, where names such as `env` or `sampler`
    # would shadow the user's modules; probes load each other by path instead.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    set_status(args.out, rank, "starting")
    try:
        ctx = init_distributed(args.backend, args.timeout)
    except Exception as exc:
        set_status(args.out, rank, "failed", error=f"init: {type(exc).__name__}: {exc}")
        raise
    import torch.distributed as dist

    prefetch_ddp_imports(modules)
    for module in modules:
        set_status(args.out, ctx.rank, "running", module.NAME)
        record = _run_one(module, args, ctx)
        write_json(os.path.join(args.out, module.NAME, f"rank{ctx.rank}.json"), record)
        if record["error"]:
            set_status(args.out, ctx.rank, "failed", module.NAME, error=record["error"])
            sys.stderr.write(f"[rank{ctx.rank}] probe {module.NAME} failed: {record['traceback']}")
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
