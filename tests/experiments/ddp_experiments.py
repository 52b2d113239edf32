"""Multi-rank experiments behind the verdicts of the forum claims (kb/claims/).

Run under torchrun with two gloo ranks on CPU:

    python -m torch.distributed.run --nproc_per_node 2 tests/experiments/ddp_experiments.py OUT

All experiments share this single launch, so starting torch and the process group happens
only once. Each rank writes ``OUT/rank<R>.json``: ``{"results": {experiment: {...}}, "errors": {...}, "done": true}``.
The tests in this folder only read those files; they decide what the numbers mean.
Run with ``--only NAME[,NAME]`` to run a subset while developing.
"""

# No `from __future__ import annotations`: DDP checks the comm hook's annotations at runtime.
import argparse
import gc
import hashlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

Result = dict[str, Any]
EXPERIMENTS: dict[str, Callable[[int, int], Result]] = {}


def experiment(fn: Callable[[int, int], Result]) -> Callable[[int, int], Result]:
    EXPERIMENTS[fn.__name__] = fn
    return fn


# ----------------------------------------------------------------------------- helpers


def mlp(seed: int, width: int = 8, layernorm: bool = False) -> nn.Module:
    """A small model; the seed makes every rank's initial weights the same or different."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = [nn.Linear(4, width), nn.Tanh()]
    if layernorm:
        layers.append(nn.LayerNorm(width))
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


def batch(seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same seed gives the same samples on every rank, so each rank can rebuild the
    global batch and compute the single-process reference itself."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=gen), torch.randn(n, 1, generator=gen)


def mse(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    return nn.functional.mse_loss(model(x), y, reduction=reduction)


def flat_grad(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def digest(tensors: list[torch.Tensor]) -> str:
    """Exact fingerprint: equal digests mean bitwise-equal tensors."""
    h = hashlib.sha1()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def shard(t: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    per = t.shape[0] // world
    return t[rank * per : (rank + 1) * per]


def reference_grad(seed: int, x: torch.Tensor, y: torch.Tensor, **kw: Any) -> torch.Tensor:
    """Gradient of the mean loss over the whole global batch in one plain process."""
    ref = mlp(seed, **kw)
    mse(ref, x, y).backward()
    return flat_grad(ref)


# ----------------------------------------------------------------------------- experiments


@experiment
def mean_vs_sum(rank: int, world: int) -> Result:
    """Per-rank mean loss + DDP averaging vs one process on the global batch; sum loss."""
    b = 3
    x, y = batch(1, b * world)
    ref = reference_grad(10, x, y)
    out: Result = {"local_batch": b}
    for reduction in ("mean", "sum"):
        model = DDP(mlp(10))
        mse(model, shard(x, rank, world), shard(y, rank, world), reduction).backward()
        grad = flat_grad(model.module)
        out[reduction] = {
            "grad": grad.tolist(),
            "max_diff_vs_reference": max_abs(grad, ref),
            "ratio_to_reference": (grad / ref).tolist(),
        }
    out["reference_grad"] = ref.tolist()
    return out


def accumulate(rank: int, world: int, k: int, b: int, variant: str) -> Result:
    """k micro-steps of b samples per rank; compare with the (k*world*b)-sample mean gradient."""
    x, y = batch(2, k * world * b)
    ref = reference_grad(11, x, y)
    model = DDP(mlp(11))
    xs = x.reshape(k, world, b, 4)
    ys = y.reshape(k, world, b, 1)
    for i in range(k):
        xi, yi = xs[i, rank], ys[i, rank]
        last = i == k - 1
        divisor = 1 if variant == "loss_not_divided" else k
        if variant == "zero_grad_inside":
            model.zero_grad()
        if variant == "no_sync" and not last:
            with model.no_sync():
                (mse(model, xi, yi) / divisor).backward()
        elif variant == "flag_after_forward":
            # The sync flag is only turned on between the last forward and its backward.
            model.require_backward_grad_sync = False
            loss = mse(model, xi, yi) / divisor
            if last:
                model.require_backward_grad_sync = True
            loss.backward()
        elif variant == "off_by_one" and i != 0:
            # Syncs the first micro-step and skips the last one.
            with model.no_sync():
                (mse(model, xi, yi) / divisor).backward()
        elif variant == "no_sync_backward_only":
            loss = mse(model, xi, yi) / divisor
            with model.no_sync():
                loss.backward()
        else:
            (mse(model, xi, yi) / divisor).backward()
    grad = flat_grad(model.module)
    return {
        "k": k,
        "grad": grad.tolist(),
        "max_diff_vs_reference": max_abs(grad, ref),
        "norm_ratio_to_reference": float(grad.norm() / ref.norm()),
    }


@experiment
def accumulation(rank: int, world: int) -> Result:
    variants = (
        "sync_every_step",
        "no_sync",
        "flag_after_forward",
        "off_by_one",
        "no_sync_backward_only",
        "zero_grad_inside",
        "loss_not_divided",
    )
    out: Result = {v: accumulate(rank, world, 4, 3, v) for v in variants}
    # Accumulation steps that do not divide by the number of ranks.
    out["k3_sync_every_step"] = accumulate(rank, world, 3, 2, "sync_every_step")
    out["k3_no_sync"] = accumulate(rank, world, 3, 2, "no_sync")
    return out


@experiment
def grad_scaler(rank: int, world: int) -> Result:
    """GradScaler has no collective of its own; an inf on rank 1 only reaches both ranks."""
    from torch.amp import GradScaler

    model = DDP(mlp(12))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**16)
    steps = []
    for step in range(3):
        x, y = batch(100 + step, 2 * world)
        xs, ys = shard(x, rank, world), shard(y, rank, world)
        if step == 1 and rank == 1:
            xs = xs.clone()
            xs[0, 0] = float("inf")
        before = flat_params(model.module).clone()
        opt.zero_grad()
        scaler.scale(mse(model, xs, ys)).backward()
        scaler.step(opt)
        scaler.update()
        steps.append(
            {
                "scale": scaler.get_scale(),
                "skipped": bool(torch.equal(before, flat_params(model.module))),
                "params": digest([flat_params(model.module)]),
            }
        )
    return {"steps": steps}


@experiment
def init_broadcast(rank: int, world: int) -> Result:
    """Different initial weights per rank (a frozen layer too), then a rank-0-only change."""
    base = mlp(1000 + rank)
    frozen = base[0]
    for p in frozen.parameters():
        p.requires_grad_(False)
    before = {"all": digest([flat_params(base)]), "frozen": digest(list(frozen.parameters()))}
    model = DDP(base)
    after = {"all": digest([flat_params(base)]), "frozen": digest(list(frozen.parameters()))}
    # A rank-conditional change after wrapping, like a checkpoint loaded on rank 0 only.
    with torch.no_grad():
        if rank == 0:
            base[2].bias.add_(1.0)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for step in range(5):
        x, y = batch(200 + step, 2 * world)
        opt.zero_grad()
        mse(model, shard(x, rank, world), shard(y, rank, world)).backward()
        opt.step()
    trained = {"all": digest([flat_params(base)]), "bias": base[2].bias.item()}
    return {"before_wrap": before, "after_wrap": after, "after_training": trained}


@experiment
def bucket_settings(rank: int, world: int) -> Result:
    """bucket_cap_mb / gradient_as_bucket_view only change memory and overlap, not the result."""
    out: Result = {}
    for cap in (None, 0.001, 100.0):
        for as_view in (False, True):
            kwargs: dict[str, Any] = {"gradient_as_bucket_view": as_view}
            if cap is not None:
                kwargs["bucket_cap_mb"] = cap
            model = DDP(mlp(13, width=32), **kwargs)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            for step in range(5):
                x, y = batch(300 + step, 4 * world)
                xs, ys = shard(x, rank, world), shard(y, rank, world)
                opt.zero_grad()
                # Two micro-steps with no_sync on the first, so accumulation is covered too.
                with model.no_sync():
                    (mse(model, xs[:2], ys[:2]) / 2).backward()
                (mse(model, xs[2:], ys[2:]) / 2).backward()
                opt.step()
            out[f"cap={cap},view={as_view}"] = digest([flat_params(model.module)])
    return out


class WithAdapter(nn.Module):
    """A base layer plus an optional adapter that forward uses once it exists."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.base = nn.Linear(4, 1)
        self.adapter: nn.Module | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        if self.adapter is not None:
            out = out + self.adapter(x)
        return out


def train_steps(model: nn.Module, rank: int, world: int, seed: int, steps: int = 4) -> None:
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    for step in range(steps):
        x, y = batch(seed + step, 2 * world)
        opt.zero_grad()
        mse(model, shard(x, rank, world), shard(y, rank, world)).backward()
        opt.step()


@experiment
def adapter_after_wrap(rank: int, world: int) -> Result:
    """An adapter injected after DDP(...) (same init on every rank) is trained locally only."""
    out: Result = {}
    for find_unused in (False, True):
        inner = WithAdapter(14)
        model = DDP(inner, find_unused_parameters=find_unused)
        torch.manual_seed(15)  # identical adapter init everywhere: only the data differ
        inner.adapter = nn.Linear(4, 1)
        error = None
        try:
            train_steps(model, rank, world, 400)
        except Exception as exc:  # a loud failure would be fine; record it for the test
            error = f"{type(exc).__name__}: {exc}"
        out[f"find_unused={find_unused}"] = {
            "adapter": digest(list(inner.adapter.parameters())),
            "base": digest(list(inner.base.parameters())),
            "error": error,
        }
    return out


@experiment
def unfreeze_after_wrap(rank: int, world: int) -> Result:
    """A layer frozen when DDP is built and unfrozen later never enters the reducer."""
    inner = mlp(16)
    for p in inner[0].parameters():
        p.requires_grad_(False)
    model = DDP(inner)
    for p in inner[0].parameters():
        p.requires_grad_(True)
    error = None
    try:
        train_steps(model, rank, world, 500)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    result = {
        "unfrozen_layer": digest(list(inner[0].parameters())),
        "always_trainable_layer": digest(list(inner[2].parameters())),
        "error": error,
    }
    return result


@experiment
def clip_norm(rank: int, world: int) -> Result:
    """clip_grad_norm_ after a DDP backward sees the averaged gradient."""
    b = 4
    x, y = batch(3, b * world)
    xs, ys = shard(x, rank, world), shard(y, rank, world)
    local = mlp(17)
    mse(local, xs, ys).backward()
    local_norm = float(flat_grad(local).norm())
    model = DDP(mlp(17))
    mse(model, xs, ys).backward()
    synced_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1e9))
    all_local = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(all_local, torch.tensor([local_norm]))
    return {
        "local_pre_sync_norm": local_norm,
        "all_local_pre_sync_norms": [float(t) for t in all_local],
        "post_sync_norm": synced_norm,
        "single_process_global_norm": float(reference_grad(17, x, y).norm()),
    }


@experiment
def frozen_not_reduced(rank: int, world: int) -> Result:
    """Record which parameters DDP actually puts into its communication buckets."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    inner = mlp(18)
    for p in inner[0].parameters():
        p.requires_grad_(False)
    names = {id(p): n for n, p in inner.named_parameters()}
    seen: set[str] = set()

    def recording_hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        seen.update(names[id(p)] for p in bucket.parameters())
        return allreduce_hook(state, bucket)

    model = DDP(inner)
    model.register_comm_hook(None, recording_hook)
    x, y = batch(4, 2 * world)
    mse(model, shard(x, rank, world), shard(y, rank, world)).backward()
    result = {
        "reduced": sorted(seen),
        "trainable": sorted(n for n, p in inner.named_parameters() if p.requires_grad),
        "frozen": sorted(n for n, p in inner.named_parameters() if not p.requires_grad),
        "frozen_grads_none": all(p.grad is None for p in inner[0].parameters()),
    }
    return result


class Branches(nn.Module):
    """``a`` is used on every rank, ``b`` only on rank 0, ``c`` never."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.tensor(1.0))
        self.b = nn.Parameter(torch.tensor(1.0))
        self.c = nn.Parameter(torch.tensor(1.0))

    def forward(self, x: torch.Tensor, use_b: bool) -> torch.Tensor:
        out = self.a * x
        if use_b:
            out = out + self.b * x
        return out


@experiment
def find_unused(rank: int, world: int) -> Result:
    inner = Branches()
    model = DDP(inner, find_unused_parameters=True)
    x = torch.tensor([float(rank + 1) * 4.0])
    use_b = rank == 0
    model(x, use_b).sum().backward()
    # d(loss)/db on rank 0 alone is x = 4; DDP averages it with rank 1's zero.
    result = {
        "grad_b": None if inner.b.grad is None else float(inner.b.grad),
        "grad_a": float(inner.a.grad),
        "grad_c_is_none": inner.c.grad is None,
        "local_grad_b_on_rank0": 4.0,
    }
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.step()
    result["params"] = digest([inner.a.detach(), inner.b.detach(), inner.c.detach()])
    return result


@experiment
def token_weighting(rank: int, world: int) -> Result:
    """Per-rank token-mean losses weigh a 3-token rank like a 1000-token rank."""
    counts = [3, 1000]
    gen = torch.Generator().manual_seed(5)
    per_rank = [
        torch.randn(n, generator=gen) + (3.0 if r == 0 else 0.0) for r, n in enumerate(counts)
    ]
    targets = torch.cat(per_rank)
    # One weight w, per-token loss (w - t)^2; the global token mean is the reference.
    ref_w = nn.Parameter(torch.tensor(0.5))
    ((ref_w - targets) ** 2).mean().backward()
    local = per_rank[rank]
    out: Result = {"reference_grad": float(ref_w.grad)}
    for scheme in ("per_rank_mean", "global_token_normalised"):
        inner = nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            inner.weight.fill_(0.5)
        model = DDP(inner)
        w = model(torch.ones(1, 1)).reshape(())
        token_losses = (w - local) ** 2
        if scheme == "per_rank_mean":
            loss = token_losses.mean()
        else:
            total = torch.tensor([float(local.numel())])
            dist.all_reduce(total)
            # DDP divides by world size, so multiply it back in.
            loss = token_losses.sum() * world / total
        loss.backward()
        out[scheme] = float(inner.weight.grad)
    return out


@experiment
def manual_average(rank: int, world: int) -> Result:
    """All-reducing gradients again after DDP's backward: redundant, or W times too big."""
    x, y = batch(6, 2 * world)
    model = DDP(mlp(19))
    mse(model, shard(x, rank, world), shard(y, rank, world)).backward()
    ddp_grad = flat_grad(model.module).clone()
    averaged, summed = [], []
    for p in model.parameters():
        g = p.grad.detach().clone()
        dist.all_reduce(g)
        summed.append(g.reshape(-1).clone())
        averaged.append((g / world).reshape(-1))
    return {
        "average_again_max_diff": max_abs(torch.cat(averaged), ddp_grad),
        "sum_again_ratio": float(torch.cat(summed).norm() / ddp_grad.norm()),
        "ddp_grad": digest([ddp_grad]),
    }


@experiment
def adam_equivalence(rank: int, world: int) -> Result:
    """Several AdamW steps under DDP vs one process on the same global batches."""
    ref = mlp(20, layernorm=True)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    model = DDP(mlp(20, layernorm=True))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(6):
        x, y = batch(600 + step, 3 * world)
        ref_opt.zero_grad()
        mse(ref, x, y).backward()
        ref_opt.step()
        opt.zero_grad()
        mse(model, shard(x, rank, world), shard(y, rank, world)).backward()
        opt.step()
    result = {
        "max_param_diff_vs_single_process": max_abs(flat_params(model.module), flat_params(ref)),
        "params": digest([flat_params(model.module)]),
        "layernorm_params": digest(list(model.module[2].parameters())),
    }
    return result


@experiment
def compiled_ddp(rank: int, world: int) -> Result:
    """torch.compile(DDP(model)) vs eager: same synced gradient; no_sync still respected."""
    x, y = batch(7, 4 * world)
    xs, ys = shard(x, rank, world), shard(y, rank, world)
    eager = DDP(mlp(21))
    mse(eager, xs, ys).backward()
    eager_grad = flat_grad(eager.module)
    inner = mlp(21)
    ddp = DDP(inner)
    compiled = torch.compile(ddp, backend="aot_eager")
    mse(compiled, xs, ys).backward()
    compiled_grad = flat_grad(inner).clone()
    inner.zero_grad()
    with ddp.no_sync():
        mse(compiled, xs, ys).backward()
    local_grad = flat_grad(inner).clone()
    return {
        "max_diff_compiled_vs_eager": max_abs(compiled_grad, eager_grad),
        "compiled_grad": digest([compiled_grad]),
        "no_sync_grad": digest([local_grad]),
    }


# ----------------------------------------------------------------------------- driver


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", default="", help="comma-separated experiment names")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    wanted = [n for n in args.only.split(",") if n] or list(EXPERIMENTS)
    results: Result = {}
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name in wanted:
        start = time.perf_counter()
        try:
            results[name] = EXPERIMENTS[name](rank, world)
        except Exception:
            errors[name] = traceback.format_exc()
        gc.collect()
        seconds[name] = round(time.perf_counter() - start, 3)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"rank{rank}.json"
    payload = {"world_size": world, "torch": torch.__version__, "results": results}
    payload.update(errors=errors, seconds=seconds, done=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, path)  # the file appears complete or not at all
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
