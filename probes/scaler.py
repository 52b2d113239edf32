"""Probe `scaler`: does GradScaler state stay identical on every rank under DDP?

Runs K fp16 autocast steps of a small model wrapped in DDP with a GradScaler (on CPU:
``torch.amp.GradScaler("cpu")`` and CPU autocast). At one step only one rank's loss becomes
inf. Every rank records, per step, the scale, the growth tracker and whether it found inf and
skipped the step; the records are all-gathered and compared. Under DDP the all-reduce spreads
the inf to every rank, so all ranks must skip the same steps and keep the same scale.

``--model MODULE:FACTORY`` and ``--after-wrap MODULE:FUNC`` (as in the checksums probe, whose
file must then sit beside this one) run the same steps on the user's model.

Run alone: ``torchrun --nproc_per_node N scaler.py --out DIR``.
Importable: ``scaler_state(scaler)``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _harness.py beside it
import _harness

sys.path.pop(0)

NAME = "scaler"
USES_DDP = True  # the harness imports torch._dynamo early for it


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
    from torch.nn.parallel import DistributedDataParallel as DDP

    if args.model:
        helpers = _harness.load_probe("checksums")
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
        _harness.load_object(args.after_wrap)(ddp)
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

    gathered = _harness.all_gather_json(rows, ctx.world_size)
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


if __name__ == "__main__":
    sys.exit(_harness.probe_main([sys.modules[__name__]]))
