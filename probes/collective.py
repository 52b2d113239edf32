"""Probe `collective`: known-answer checks of every collective DDP relies on.

all_reduce (sum and avg), broadcast (from the first and the last rank), all_gather and
reduce_scatter run on tensors whose exact result is known in advance, at several sizes (up to
tens of MB) and in float32, bfloat16 and float16. Every rank checks what it received, so a
wrong result names the rank, op, dtype and size. Sums are exact by construction (small
integers, kept below the dtype's exact-integer limit); averages get a rounding tolerance.

Run alone: ``torchrun --nproc_per_node N collective.py --out DIR`` (stdlib + torch only).
Importable: ``allreduce_selftest(group=None)`` runs the same checks inside a real job.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import importlib.util
import json
import math
import os
import socket
import sys
import time
import traceback
import types
import warnings
from typing import Any

NAME = "collective"
OPS = ("all_reduce_sum", "all_reduce_avg", "broadcast", "all_gather", "reduce_scatter")
# Element counts; odd sizes catch chunking bugs. On CPU the largest is 4 MiB in float32 (gloo
# is slow on big tensors and its algorithm does not change with size); on GPU it is 64 MiB, past
# the sizes where NCCL switches protocol and algorithm.
DEFAULT_SIZES = (1, 1023, 65_537, 1_048_573)
GPU_SIZES = (1, 1023, 65_537, 1_048_573, 4_194_301, 16_777_259)
DEFAULT_DTYPES = ("float32", "bfloat16", "float16")
# Largest integer up to which every integer is exactly representable.
EXACT_INTEGERS = {"float32": 2**24, "float64": 2**53, "bfloat16": 2**8, "float16": 2**11}
COPY_PERIOD = 251  # copies use values -125..125: exact in every dtype, distinct per rank


def add_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("collective probe")
    group.add_argument(
        "--sizes",
        default=None,
        help="comma-separated element counts (default: up to 1M on CPU, 16M on GPU)",
    )
    group.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES), help="comma-separated")


def _dtype(name: Any) -> Any:
    import torch

    if isinstance(name, torch.dtype):
        return name
    return getattr(torch, str(name).replace("torch.", ""))


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _tile(period: Any, start: int, n: int) -> Any:
    """Elements start..start+n of the infinite repetition of ``period`` (cheap for large n)."""
    length = period.numel()
    offset = start % length
    reps = (offset + n + length - 1) // length
    return period.repeat(reps)[offset : offset + n]


class _Pattern:
    """Per-rank integer inputs whose sum over ranks is known in closed form and exact.

    Dense form: rank r holds ((i + r) mod p) - m with |value| <= m and world * m below the
    dtype's exact-integer limit. When the world is too large for that (bfloat16 beyond 256
    ranks), the sparse form holds 1 where (i + r) is a multiple of q and 0 elsewhere, so every
    sum stays a small count. Both repeat with a short period, so they are built by tiling.
    """

    def __init__(self, world: int, dtype_name: str):
        limit = EXACT_INTEGERS.get(dtype_name, 2**8)
        self.world = world
        self.m = min(8, limit // max(world, 1))
        self.p = 2 * self.m + 1
        self.q = max(1, math.ceil(world / (limit // 2)))
        self.magnitude = max(self.m, 1)  # largest |value| on one rank

    def values(self, start: int, n: int, rank: int, dtype: Any, device: Any) -> Any:
        import torch

        if self.m >= 1:
            idx = torch.arange(self.p, device=device)
            period = (idx + rank) % self.p - self.m
        else:
            idx = torch.arange(self.q, device=device)
            period = ((idx + rank) % self.q == 0).long()
        return _tile(period.to(dtype), start, n)

    def total(self, start: int, n: int, device: Any) -> Any:
        """Exact sum over all ranks (float32 holds it exactly: it stays below 2**24)."""
        import torch

        if self.m >= 1:
            idx = torch.arange(self.p, device=device)
            full, rem = divmod(self.world, self.p)
            period = torch.full_like(idx, full * self.p * (self.p - 1) // 2 - self.world * self.m)
            for k in range(rem):
                period += (idx + k) % self.p
        else:
            idx = torch.arange(self.q, device=device)
            full, rem = divmod(self.world, self.q)
            period = full + ((-idx) % self.q < rem).long()
        return _tile(period.float(), start, n)


def _copy_values(n: int, rank: int, dtype: Any, device: Any) -> Any:
    import torch

    idx = torch.arange(COPY_PERIOD, device=device)
    period = (idx * 7 + rank * 31) % COPY_PERIOD - COPY_PERIOD // 2
    return _tile(period.to(dtype), 0, n)


def _max_err(got: Any, expected: Any) -> float:
    err = (got.float() - expected).abs().max().item()
    return float("inf") if err != err else float(err)  # NaN counts as wrong


def _unsupported(exc: BaseException) -> bool:
    """Whether an error says the backend lacks this op or dtype (not a timeout or a crash)."""
    text = str(exc).lower()
    return any(
        w in text for w in ("not supported", "unsupported", "does not support", "not implemented")
    )


def _corrupt(tensor: Any) -> None:
    """Test-only: simulate a corrupted result on this rank."""
    tensor.view(-1)[0] += 1


def _one_case(dist: Any, op: str, n: int, dtype: Any, ctx: dict[str, Any]) -> list[float]:
    """Run one op and return the errors and tolerances seen on this rank: [err, tol]."""
    import torch

    rank, world, device, group = ctx["rank"], ctx["world"], ctx["device"], ctx["group"]
    name = _dtype_name(dtype)
    eps = torch.finfo(dtype).eps
    pattern = _Pattern(world, name)
    if op.startswith("all_reduce"):
        tensor = pattern.values(0, n, rank, dtype, device).clone()
        avg = op.endswith("avg")
        dist.all_reduce(tensor, op=dist.ReduceOp.AVG if avg else dist.ReduceOp.SUM, group=group)
        if ctx["corrupt"]:
            _corrupt(tensor)
        expected = pattern.total(0, n, device)
        if avg:
            # Averaging rounds (NCCL pre-multiplies by 1/world); allow reduction-order error.
            return [_max_err(tensor, expected / world), eps * pattern.magnitude * (world + 2) / 2]
        return [_max_err(tensor, expected), 0.0]
    if op == "broadcast":
        worst = 0.0
        for root in sorted({0, world - 1}):
            tensor = _copy_values(n, rank, dtype, device).clone()
            src = root if group is None else dist.get_global_rank(group, root)
            dist.broadcast(tensor, src=src, group=group)
            worst = max(worst, _max_err(tensor, _copy_values(n, root, torch.float32, device)))
        return [worst, 0.0]
    if op == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        out = torch.empty(world * n, dtype=dtype, device=device)
        gather(out, _copy_values(n, rank, dtype, device).contiguous(), group=group)
        expected = torch.cat([_copy_values(n, r, torch.float32, device) for r in range(world)])
        return [_max_err(out, expected), 0.0]
    if op == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        out = torch.empty(n, dtype=dtype, device=device)
        scatter(out, pattern.values(0, world * n, rank, dtype, device).contiguous(), group=group)
        return [_max_err(out, pattern.total(rank * n, n, device)), 0.0]
    raise ValueError(f"unknown op {op!r}")


def allreduce_selftest(
    group: Any = None,
    sizes: tuple[int, ...] | None = None,
    dtypes: tuple[Any, ...] = DEFAULT_DTYPES,
    ops: tuple[str, ...] = OPS,
) -> dict[str, Any]:
    """Known-answer collective checks on ``group``; every rank gets the same report.

    Returns ``{"ok", "failures": [{"op", "dtype", "size", "rank", "max_abs_err"}], "skipped",
    "cases", "seconds"}``. Collective; call it on every rank of the group.
    """
    import torch
    import torch.distributed as dist

    backend = str(dist.get_backend(group))
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    if sizes is None:
        sizes = GPU_SIZES if device.type == "cuda" else DEFAULT_SIZES
    ctx = {
        "rank": dist.get_rank(group),
        "world": dist.get_world_size(group),
        "device": device,
        "group": group,
    }
    global_rank = dist.get_rank()
    local_failures, skipped = [], []
    seconds: dict[str, float] = {}
    cases = 0
    with warnings.catch_warnings():  # deprecation notices of the older collective names
        warnings.simplefilter("ignore", FutureWarning)
        for op in ops:
            started = time.perf_counter()
            ctx["corrupt"] = op.startswith("all_reduce") and (
                fault_for(NAME, global_rank) == "corrupt_allreduce"
            )
            for dtype_spec in dtypes:
                dtype = _dtype(dtype_spec)
                for n in sizes:
                    try:
                        err, tol = _one_case(dist, op, int(n), dtype, ctx)
                    except (RuntimeError, TypeError, ValueError) as exc:
                        if not _unsupported(exc):
                            raise
                        skipped.append(
                            {"op": op, "dtype": _dtype_name(dtype), "size": n, "reason": str(exc)}
                        )
                        continue
                    cases += 1
                    if not err <= tol:
                        local_failures.append(
                            {
                                "op": op,
                                "dtype": _dtype_name(dtype),
                                "size": int(n),
                                "rank": global_rank,
                                "max_abs_err": err,
                                "tolerance": tol,
                            }
                        )
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds[op] = round(time.perf_counter() - started, 4)
    gathered: list[Any] = [None] * ctx["world"]
    dist.all_gather_object(gathered, local_failures, group=group)
    failures = sorted(
        (f for per_rank in gathered for f in per_rank),
        key=lambda f: (f["rank"], OPS.index(f["op"]) if f["op"] in OPS else 0, f["size"]),
    )
    return {
        "ok": not failures,
        "failures": failures,
        "skipped": skipped,
        "cases": cases,
        "sizes": [int(n) for n in sizes],
        "dtypes": [_dtype_name(_dtype(d)) for d in dtypes],
        "ops": list(ops),
        "seconds": seconds,
    }


def describe_failures(failures: list[dict[str, Any]], limit: int = 4) -> str:
    """One sentence naming the ranks and ops that got a wrong result."""
    by_rank: dict[int, list[str]] = {}
    for f in failures:
        by_rank.setdefault(f["rank"], []).append(
            f"{f['op']} {f['dtype']} n={f['size']} (error {f['max_abs_err']:g})"
        )
    parts = []
    for rank, cases in sorted(by_rank.items()):
        more = f" and {len(cases) - limit} more" if len(cases) > limit else ""
        parts.append(f"rank {rank}: " + ", ".join(cases[:limit]) + more)
    return "; ".join(parts)


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else None
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    report = allreduce_selftest(None, sizes=sizes, dtypes=dtypes)
    if report["ok"]:
        summary = f"all {report['cases']} known-answer cases correct on every rank"
    else:
        summary = "WRONG results: " + describe_failures(report["failures"])
    return {"summary": summary, "subject": "environment", **report}


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
