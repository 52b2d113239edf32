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
import math
import os
import sys
import time
import types
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _harness.py beside it
import _harness

sys.path.pop(0)

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
    sizes_help = "comma-separated element counts (default: up to 1M on CPU, 16M on GPU)"
    group.add_argument("--sizes", default=None, help=sizes_help)
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
                _harness.fault_for(NAME, global_rank) == "corrupt_allreduce"
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
    gathered = _harness.all_gather_json(local_failures, ctx["world"], group=group)
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


if __name__ == "__main__":
    sys.exit(_harness.probe_main([sys.modules[__name__]]))
