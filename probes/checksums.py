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
import json
import os
import sys
import types
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _harness.py beside it
import _harness

sys.path.pop(0)

NAME = "checksums"
USES_DDP = True  # the harness imports torch._dynamo early for it
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
    built = _harness.load_object(spec)()
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

    names = [n for n, _ in named]
    values = fingerprint([t for _, t in named]).cpu().tolist()
    gathered = _harness.all_gather_json((names, values), world_size)
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
        _harness.load_object(args.after_wrap)(ddp)
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


if __name__ == "__main__":
    sys.exit(_harness.probe_main([sys.modules[__name__]]))
