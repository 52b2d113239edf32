"""Probe `checksums`: do all ranks hold the same parameters, buffers and gradients?

Builds a model (``--model MODULE:FACTORY``, default a small built-in transformer) on every
rank and fingerprints every parameter and buffer (float64 sum and sum of squares) before DDP
wraps it, right after wrapping (and after ``--after-wrap MODULE:FUNC``, which may change the
wrapped model the way a training script does), and after K synthetic training steps. The
fingerprints are all-gathered and compared; gradients are compared after every synchronising
backward. Every tensor that differs is named with the ranks that hold another value. It also
lists trainable parameters that DDP's reducer does not hold (added or unfrozen after wrapping).

FACTORY() returns a module, or (module, make_batch) where make_batch(step, rank) returns the
forward's input: a tensor, a tuple of positional arguments or a dict of keyword arguments.
Without make_batch no steps run. The loss is the output when it is a scalar, its ``loss``
entry or attribute when it has one, else the mean square of the first tensor in it.

Run alone: ``torchrun --nproc_per_node N checksums.py --out DIR [--model mymod:build]``.
Importable: ``fingerprint``, ``compare_fingerprints``, ``params_not_in_reducer``.
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
from collections import Counter
from typing import Any

NAME = "checksums"
BUILTIN = "built-in tiny transformer"


def add_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("checksums and scaler probes")
    group.add_argument(
        "--model",
        default=None,
        metavar="MODULE:FACTORY",
        help="FACTORY() -> module or (module, make_batch(step, rank)); default: built-in",
    )
    group.add_argument(
        "--after-wrap",
        default=None,
        metavar="MODULE:FUNC",
        help="FUNC(ddp_model) runs right after wrapping, as the training script would",
    )
    group.add_argument(
        "--ddp-kwargs",
        default="{}",
        metavar="JSON",
        help='keyword arguments for DistributedDataParallel, e.g. {"broadcast_buffers": false}',
    )
    group.add_argument("--steps", type=int, default=3, help="synthetic training steps")


# ---------------------------------------------------------------- importable checks


def fingerprint(tensors: list[Any]) -> Any:
    """Per tensor [float64 sum, float64 sum of squares], shape [n, 2], on the tensors' device.

    No host synchronisation: the result stays on the device until the caller reads it.
    """
    import torch

    if not tensors:
        return torch.zeros((0, 2), dtype=torch.float64)
    rows = []
    for t in tensors:
        x = t.detach()
        if x.is_complex():
            x = torch.view_as_real(x)
        x = x.to(torch.float64)
        rows.append(torch.stack([x.sum(), (x * x).sum()]))
    return torch.stack(rows)


def compare_fingerprints(
    gathered: list[Any], names: list[str], atol: float = 0.0
) -> list[dict[str, Any]]:
    """Tensors whose fingerprint is not the same on every rank.

    ``gathered[r]`` is rank r's ``fingerprint`` (same order as ``names``). Each entry names the
    tensor, the ranks whose value differs from rank 0's, the ranks that differ from the most
    common value (``odd_ranks``), and every rank's [sum, sumsq]. NaN equals NaN. Empty: all equal.
    """
    import torch

    if not gathered:
        return []
    table = torch.stack([g.detach().to("cpu", torch.float64) for g in gathered])  # [ranks, n, 2]
    ref = table[0]
    if atol > 0:
        same = (table - ref).abs() <= atol
    else:
        same = table == ref
    same = same | (torch.isnan(table) & torch.isnan(ref))
    differs = ~same.all(dim=2)  # [ranks, n]
    out = []
    for i in differs.any(dim=0).nonzero().flatten().tolist():
        values = table[:, i, :].tolist()
        keys = [tuple("nan" if x != x else x for x in v) for v in values]  # NaN == NaN
        common, _ = Counter(keys).most_common(1)[0]
        out.append(
            {
                "name": names[i],
                "ranks": differs[:, i].nonzero().flatten().tolist(),
                "odd_ranks": [r for r, k in enumerate(keys) if k != common],
                "values": values,
            }
        )
    return out


def _reducer_param_ids(ddp_model: Any) -> tuple[set[int] | None, bool]:
    """Ids of the parameters DDP's reducer holds, and whether the set is exact.

    The exact set comes from the reducer's buckets, which costs a temporary copy of the
    gradients, so it is read only when the cheap checks say something is missing.
    """
    wrapped = getattr(ddp_model, "_module_parameters", None)  # every parameter at wrap time
    if wrapped is not None:
        at_wrap = {id(p) for p in wrapped}
        trainable_now = sum(1 for p in wrapped if p.requires_grad)
        reduced = None
        with contextlib.suppress(Exception):  # private API, absent in some versions
            reduced = int(ddp_model._get_ddp_logging_data()["num_parameter_tensors"])
        if reduced is not None and reduced >= trainable_now:
            return at_wrap, True  # nothing was unfrozen after wrapping
    reducer = getattr(ddp_model, "reducer", None)
    try:
        buckets = reducer._get_zeros_like_grad_buckets()  # type: ignore[union-attr]
        return {id(p) for bucket in buckets for p in bucket.parameters()}, True
    except Exception:
        pass
    if wrapped is not None:
        return {id(p) for p in wrapped}, False  # catches additions, not unfreezing
    return None, False


def params_not_in_reducer(ddp_model: Any) -> list[str]:
    """Names of trainable parameters that DDP never all-reduces.

    They were created after wrapping (adapters injected into ``ddp.module``) or unfrozen after
    wrapping. Parameters the user asked DDP to ignore are left out. Relies on semi-private DDP
    attributes and returns [] when none of them exists in this torch version.
    """
    module = getattr(ddp_model, "module", None)
    if module is None:
        return []
    held, _ = _reducer_param_ids(ddp_model)
    if held is None:
        return []
    ignored = set(getattr(ddp_model, "parameters_to_ignore", ()) or ())
    return [
        name
        for name, p in module.named_parameters()
        if p.requires_grad and name not in ignored and id(p) not in held
    ]


# ---------------------------------------------------------------- the probe


def builtin_model() -> tuple[Any, Any]:
    """A two-layer transformer encoder with a positional buffer, and its synthetic batches."""
    import torch
    from torch import nn

    vocab, dim, seq = 64, 32, 16

    class TinyTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            position = torch.arange(seq).unsqueeze(1) / 10_000 ** (torch.arange(dim) / dim)
            self.register_buffer("positions", torch.sin(position))
            layer = nn.TransformerEncoderLayer(
                dim, nhead=4, dim_feedforward=2 * dim, dropout=0.0, batch_first=True
            )
            self.blocks = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab)

        def forward(self, tokens: Any) -> Any:
            hidden = self.embed(tokens) + self.positions[: tokens.shape[1]]
            return self.head(self.norm(self.blocks(hidden)))

    def make_batch(step: int, rank: int) -> Any:
        generator = torch.Generator().manual_seed(1000 * step + rank)
        return torch.randint(vocab, (4, seq), generator=generator)

    return TinyTransformer(), make_batch


def build_model(spec: str | None) -> tuple[Any, Any, str]:
    """(module, make_batch or None, label) from --model, or the built-in model."""
    if not spec:
        model, make_batch = builtin_model()
        return model, make_batch, BUILTIN
    built = load_object(spec)()
    if isinstance(built, tuple):
        return built[0], (built[1] if len(built) > 1 else None), spec
    return built, None, spec


def to_device(batch: Any, device: Any) -> Any:
    if hasattr(batch, "to"):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def call(model: Any, batch: Any) -> Any:
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (list, tuple)):
        return model(*batch)
    return model(batch)


def as_loss(output: Any) -> Any:
    """A scalar to backpropagate from whatever the model returned."""
    import torch

    if isinstance(output, torch.Tensor):
        return output if output.dim() == 0 else output.float().square().mean()
    if isinstance(output, dict) and "loss" in output:
        return as_loss(output["loss"])
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return as_loss(loss)
    items = list(output.values()) if isinstance(output, dict) else output
    if isinstance(items, (list, tuple)):
        for item in items:
            if isinstance(item, torch.Tensor):
                return as_loss(item)
    raise TypeError(f"cannot make a loss from a {type(output).__name__}")


def gather_and_compare(named: list[tuple[str, Any]], world_size: int) -> list[dict[str, Any]]:
    """All-gather fingerprints of named tensors and report those that differ between ranks.

    Tensors present on some ranks only are reported too (``missing_on``), since ranks that
    build different models are themselves a finding.
    """
    import torch
    import torch.distributed as dist

    names = [n for n, _ in named]
    values = fingerprint([t for _, t in named]).cpu().tolist()
    gathered: list[Any] = [None] * world_size
    dist.all_gather_object(gathered, (names, values))
    common = [n for n in names if all(n in g[0] for g in gathered)]
    tables = []
    for rank_names, rank_values in gathered:
        index = {n: i for i, n in enumerate(rank_names)}
        rows = [rank_values[index[n]] for n in common]
        tables.append(torch.tensor(rows, dtype=torch.float64).reshape(len(common), 2))
    out = compare_fingerprints(tables, common)
    everywhere = set(common)
    for name in sorted({n for g in gathered for n in g[0]} - everywhere):
        lacking = [r for r, g in enumerate(gathered) if name not in g[0]]
        out.append({"name": name, "ranks": lacking, "odd_ranks": lacking, "missing_on": lacking})
    return out


def _named_grads(model: Any) -> list[tuple[str, Any]]:
    return [(n, p.grad) for n, p in model.named_parameters() if p.grad is not None]


def describe(diffs: list[dict[str, Any]], limit: int = 3) -> str:
    """'fc.weight (rank 1), fc.bias (ranks 1, 2) and 3 more'."""
    parts = []
    for d in diffs[:limit]:
        ranks = d.get("odd_ranks") or d["ranks"]
        label = "rank" if len(ranks) == 1 else "ranks"
        missing = " missing" if d.get("missing_on") else ""
        parts.append(f"{d['name']} ({label} {', '.join(map(str, ranks))}{missing})")
    more = f" and {len(diffs) - limit} more" if len(diffs) > limit else ""
    return ", ".join(parts) + more


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:
    import torch
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.parallel import DistributedDataParallel as DDP

    model, make_batch, label = build_model(args.model)
    model = model.to(ctx.device)
    has_batchnorm = any(isinstance(m, _BatchNorm) for m in model.modules())
    ddp_kwargs = json.loads(args.ddp_kwargs or "{}")
    world = ctx.world_size

    def snapshot(module: Any) -> dict[str, Any]:
        return {
            "params": gather_and_compare(list(module.named_parameters()), world),
            "buffers": gather_and_compare(list(module.named_buffers()), world),
        }

    stages = {"before_wrap": snapshot(model)}
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    ddp = DDP(model, device_ids=device_ids, **ddp_kwargs)
    if args.after_wrap:
        load_object(args.after_wrap)(ddp)
    stages["after_wrap"] = snapshot(ddp.module)
    missing = params_not_in_reducer(ddp)

    grad_diffs: list[dict[str, Any]] = []
    steps_run, skipped_reason = 0, None
    if make_batch is None:
        skipped_reason = "the model factory returned no make_batch(step, rank)"
    elif args.steps > 0:
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
        for step in range(args.steps):
            batch = to_device(make_batch(step, ctx.rank), ctx.device)
            as_loss(call(ddp, batch)).backward()
            for diff in gather_and_compare(_named_grads(ddp.module), world):
                grad_diffs.append({**diff, "step": step})
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps_run += 1
        # DDP syncs buffers at the start of a forward; compare them as an evaluation sees them.
        ddp.eval()
        with torch.no_grad():
            call(ddp, to_device(make_batch(args.steps, ctx.rank), ctx.device))
        stages["after_steps"] = snapshot(ddp.module)
        missing = sorted(set(missing) | set(params_not_in_reducer(ddp)))
        del optimizer
    del ddp, model

    final = stages.get("after_steps", stages["after_wrap"])
    param_diffs = final["params"] or stages["after_wrap"]["params"]
    buffer_diffs = final["buffers"] or stages["after_wrap"]["buffers"]
    grad_names = sorted({d["name"] for d in grad_diffs})
    problems = []
    if param_diffs:
        problems.append("parameters differ: " + describe(param_diffs))
    if buffer_diffs:
        problems.append("buffers differ: " + describe(buffer_diffs))
    if grad_names:
        first = [d for d in grad_diffs if d["step"] == grad_diffs[0]["step"]]
        problems.append(
            f"gradients differ after sync at step {grad_diffs[0]['step']}: " + describe(first)
        )
    if missing:
        problems.append("not in DDP's reducer: " + ", ".join(missing[:3]))
    summary = f"{label}: " + (
        "; ".join(problems) if problems else f"identical on every rank after {steps_run} steps"
    )
    return {
        "summary": summary,
        "subject": "builtin" if label == BUILTIN else "user",
        "model": label,
        "after_wrap_hook": args.after_wrap,
        "ddp_kwargs": ddp_kwargs,
        "has_batchnorm": has_batchnorm,
        "steps": steps_run,
        "steps_skipped": skipped_reason,
        "stages": stages,
        "grad_diffs": grad_diffs,
        "params_match": not param_diffs,
        "buffers_match": not buffer_diffs,
        "grads_match": None if not steps_run else not grad_diffs,
        "params_not_in_reducer": missing,
        "before_wrap_differed": bool(stages["before_wrap"]["params"]),
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
