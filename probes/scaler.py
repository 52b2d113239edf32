"""Probe `scaler`: does GradScaler state stay identical on every rank under DDP?

Runs K fp16 autocast steps of a small model wrapped in DDP with a GradScaler (on CPU:
``torch.amp.GradScaler("cpu")`` and CPU autocast). At one step only one rank's loss becomes
inf. Every rank records, per step, the scale, the growth tracker and whether it found inf and
skipped the step; the records are all-gathered and compared. Under DDP the all-reduce spreads
the inf to every rank, so all ranks must skip the same steps and keep the same scale.

``--model MODULE:FACTORY`` and ``--after-wrap MODULE:FUNC`` (as in the checksums probe, whose
file must then sit next to this one) run the same steps on the user's model.

Run alone: ``torchrun --nproc_per_node N scaler.py --out DIR``.
Importable: ``scaler_state(scaler)``.
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
import time
import traceback
import types
from typing import Any

NAME = "scaler"


def add_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scaler probe")
    group.add_argument("--scaler-steps", type=int, default=6, help="fp16 steps to run")
    group.add_argument("--inf-step", type=int, default=2, help="step whose loss becomes inf")
    group.add_argument(
        "--inf-rank", type=int, default=None, help="the rank that sees inf (default: last)"
    )
    group.add_argument("--model", default=None, metavar="MODULE:FACTORY")
    group.add_argument("--after-wrap", default=None, metavar="MODULE:FUNC")
    group.add_argument("--ddp-kwargs", default="{}", metavar="JSON")


def scaler_state(scaler: Any) -> dict[str, Any]:
    """{"scale": float, "growth_tracker": int} of a GradScaler (reads private state safely)."""
    scale = float(scaler.get_scale())
    tracker = 0
    try:
        tracker = int(scaler._get_growth_tracker())
    except Exception:  # private API: fall back to the attribute, else 0
        value = getattr(scaler, "_growth_tracker", None)
        with contextlib.suppress(Exception):
            tracker = int(value.item() if hasattr(value, "item") else value or 0)
    return {"scale": scale, "growth_tracker": tracker}


def found_inf(scaler: Any, optimizer: Any) -> float | None:
    """Non-finite gradients found by unscale_ for this optimizer (between step and update)."""
    try:
        per_device = scaler._found_inf_per_device(optimizer)
        return float(sum(float(v.item()) for v in per_device.values()))
    except Exception:  # private API
        return None


def make_scaler(device_type: str) -> Any:
    import torch

    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler(device_type, init_scale=2.0**10, growth_interval=2)
    if device_type == "cuda":  # torch before 2.3
        return torch.cuda.amp.GradScaler(init_scale=2.0**10, growth_interval=2)
    raise RuntimeError("this torch has no GradScaler for CPU (torch.amp.GradScaler)")


def _sibling(name: str) -> types.ModuleType:
    """Another probe file from this folder (only --model needs one)."""
    key = f"ddpadvisor_probe_{name}"
    if key not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        if not os.path.exists(path):
            raise RuntimeError(f"--model needs {name}.py next to {os.path.basename(__file__)}")
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[key] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[key]


def _builtin() -> tuple[Any, Any, Any]:
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def make_batch(step: int, rank: int) -> Any:
        return torch.randn(8, 16, generator=torch.Generator().manual_seed(1000 * step + rank))

    def loss_of(module: Any, batch: Any) -> Any:
        return module(batch).float().square().mean()

    return model, make_batch, loss_of


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    if args.model:
        helpers = _sibling("checksums")
        model, make_batch, label = helpers.build_model(args.model)
        if make_batch is None:
            raise RuntimeError(f"{args.model} returned no make_batch(step, rank)")

        def loss_of(module: Any, batch: Any) -> Any:
            return helpers.as_loss(helpers.call(module, helpers.to_device(batch, ctx.device)))
    else:
        model, make_batch, loss_of = _builtin()
        label = "built-in MLP"
    device_type = ctx.device.type
    model = model.to(ctx.device)
    device_ids = [ctx.device.index] if device_type == "cuda" else None
    ddp = DDP(model, device_ids=device_ids, **json.loads(args.ddp_kwargs or "{}"))
    if args.after_wrap:
        load_object(args.after_wrap)(ddp)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    scaler = make_scaler(device_type)
    inf_rank = ctx.world_size - 1 if args.inf_rank is None else args.inf_rank
    try:
        torch.autocast(device_type, dtype=torch.float16)
        autocast_ok = True
    except Exception:  # CPU autocast without float16 in older torch
        autocast_ok = False
    rows = []
    for step in range(args.scaler_steps):
        batch = make_batch(step, ctx.rank)
        if hasattr(batch, "to"):
            batch = batch.to(ctx.device)
        scale_before = scaler_state(scaler)["scale"]
        with torch.autocast(device_type, dtype=torch.float16, enabled=autocast_ok):
            loss = loss_of(ddp, batch)
        if step == args.inf_step and ctx.rank == inf_rank:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        inf_seen = found_inf(scaler, optimizer)
        scaler.update()
        state = scaler_state(scaler)
        rows.append([scale_before, inf_seen, state["scale"], state["growth_tracker"]])
        optimizer.zero_grad(set_to_none=True)
    del ddp, optimizer, model

    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, rows)
    steps, state_diffs, skip_diffs = [], [], []
    for step in range(args.scaler_steps):
        per_rank = [g[step] for g in gathered]
        record = {
            "step": step,
            "inf_injected_on_rank": inf_rank if step == args.inf_step else None,
            "scale": [r[2] for r in per_rank],
            "growth_tracker": [r[3] for r in per_rank],
            "found_inf": [r[1] for r in per_rank],
            "skipped": [bool(r[1]) if r[1] is not None else r[2] < r[0] for r in per_rank],
        }
        steps.append(record)
        if len({(r[2], r[3]) for r in per_rank}) > 1:
            state_diffs.append(step)
        if len(set(record["skipped"])) > 1:
            skip_diffs.append(step)
    match = not state_diffs and not skip_diffs
    skipped_steps = [s["step"] for s in steps if all(s["skipped"])]
    if match:
        summary = (
            f"{label}: scale and growth tracker identical on every rank over {len(steps)} steps; "
            f"all ranks skipped step(s) {skipped_steps or 'none'}"
        )
    else:
        first = (state_diffs + skip_diffs)[0]
        summary = (
            f"{label}: GradScaler state DIFFERS between ranks from step {first}: "
            f"scales {steps[first]['scale']}, skipped {steps[first]['skipped']}"
        )
    return {
        "summary": summary,
        "subject": "builtin" if not args.model else "user",
        "model": label,
        "device_type": device_type,
        "autocast_fp16": autocast_ok,
        "inf_step": args.inf_step,
        "inf_rank": inf_rank,
        "steps": steps,
        "state_match": not state_diffs,
        "skips_match": not skip_diffs,
        "scaler_state_match": match,
        "differing_steps": sorted(set(state_diffs + skip_diffs)),
        "skipped_steps": skipped_steps,
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
