"""A tiny DDP training job for the GPU check (bench/gpu_check/run.sh), run under torchrun.

    python -m torch.distributed.run --standalone --nproc_per_node N train_tiny.py [options]

One script, several jobs chosen by flags: the precision (--amp none|bf16|fp16), a GradScaler
(--scaler), where gradients are clipped (--clip after-unscale: the correct order;
before-unscale: the clip-before-unscale fault) and whether a DistributedSampler shards the data
(--no-sampler: every rank reads the same batches, the no-distributed-sampler fault).
``--selftest`` runs known-answer collectives on the chosen device instead of training (gloo on
CUDA tensors is what DDP uses when two ranks share one GPU).

Also importable by the probes: ``build_model`` (``--model FILE:build_model``) and
``seed_everything`` (``--setup FILE:seed_everything``). Standard library and torch only.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import random
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

FEATURES = 32
CLASSES = 4
BATCH = 16


class TinyNet(nn.Module):
    """A small MLP with a LayerNorm: cheap, but with mixed-precision-sensitive parts."""

    def __init__(self, width: int = 128) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, width)
        self.norm = nn.LayerNorm(width)
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.inp(x))
        h = F.gelu(self.hidden(self.norm(h)))
        return self.out(h)


def seed_everything(seed: int = 1234) -> None:
    """The same seed on every rank (what a correct DDP script does); numpy too, if present."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


def build_model() -> tuple[nn.Module, Any]:
    """For the probes' --model: the model and make_batch(step, rank)."""
    torch.manual_seed(0)
    model = TinyNet()

    def make_batch(step: int, rank: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(1000 * step + rank)
        return torch.randn(BATCH, FEATURES, generator=gen)

    return model, make_batch


def make_dataset(size: int) -> torch.utils.data.TensorDataset:
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(size, FEATURES, generator=gen)
    y = (x[:, :CLASSES] + 0.3 * torch.randn(size, CLASSES, generator=gen)).argmax(1)
    return torch.utils.data.TensorDataset(x, y)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("nccl", "gloo"), default="gloo")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--amp", choices=("none", "bf16", "fp16"), default="none")
    p.add_argument("--scaler", action="store_true", help="use torch.amp.GradScaler")
    p.add_argument(
        "--clip", choices=("none", "after-unscale", "before-unscale"), default="after-unscale"
    )
    p.add_argument("--no-sampler", action="store_true", help="no DistributedSampler (fault)")
    p.add_argument(
        "--rank0-load",
        type=int,
        default=0,
        metavar="STEP",
        help="at this step rank 0 alone loads a changed state dict after the wrap (fault)",
    )
    p.add_argument("--steps", type=int, default=30, help="optimizer steps")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--summary", default=None, help="folder for a per-rank summary JSON")
    p.add_argument("--selftest", action="store_true", help="known-answer collectives only")
    p.add_argument("--timeout", type=float, default=60.0, help="collective timeout, seconds")
    return p.parse_args(argv)


def join(args: argparse.Namespace) -> tuple[int, int, torch.device]:
    """init_process_group on the chosen backend; every local rank uses the chosen device."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cpu")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("train_tiny.py: --device cuda but CUDA is not available")
        # Ranks beyond the GPUs share them (two gloo ranks on one GPU).
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    kwargs: dict[str, Any] = {"timeout": datetime.timedelta(seconds=args.timeout)}
    if args.backend == "nccl":
        kwargs["device_id"] = device
    dist.init_process_group(args.backend, **kwargs)
    return dist.get_rank(), dist.get_world_size(), device


def write_summary(args: argparse.Namespace, rank: int, data: dict[str, Any]) -> None:
    if not args.summary:
        return
    os.makedirs(args.summary, exist_ok=True)
    path = os.path.join(args.summary, f"rank{rank}.json")
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(tmp, path)


def selftest(rank: int, world: int, device: torch.device) -> dict[str, Any]:
    """Known-answer all_reduce / broadcast / all_gather on ``device``; exact by construction."""
    cases: list[dict[str, Any]] = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n in (1, 1000, 1 << 20):
            for op in ("all_reduce", "broadcast", "all_gather"):
                case: dict[str, Any] = {"op": op, "dtype": str(dtype), "n": n}
                try:
                    base = torch.arange(n, device=device, dtype=torch.float32) % 8
                    if op == "all_reduce":
                        t = (base + rank).to(dtype)
                        dist.all_reduce(t)
                        want = base * world + world * (world - 1) / 2
                    elif op == "broadcast":
                        root = world - 1
                        t = (base + rank).to(dtype)
                        dist.broadcast(t, src=root)
                        want = base + root
                    else:
                        parts = [torch.empty(n, device=device, dtype=dtype) for _ in range(world)]
                        dist.all_gather(parts, (base + rank).to(dtype))
                        t = torch.cat(parts)
                        want = torch.cat([base + r for r in range(world)])
                    err = float((t.float() - want).abs().max().item())
                    case.update(ok=err == 0.0, max_abs_err=err)
                except Exception as exc:  # an unsupported combination is a finding, not a crash
                    case.update(ok=None, error=f"{type(exc).__name__}: {exc}"[:300])
                cases.append(case)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    failed = [c for c in cases if c["ok"] is False]
    errors = [c for c in cases if c["ok"] is None]
    return {"cases": cases, "ok": not failed, "failed": len(failed), "errors": len(errors)}


def train(args: argparse.Namespace, rank: int, world: int, device: torch.device) -> dict[str, Any]:
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    seed_everything()
    dataset = make_dataset(args.steps * BATCH * max(world, 2))
    sampler = None if args.no_sampler else DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(
        dataset, batch_size=BATCH, sampler=sampler, shuffle=sampler is None, drop_last=True
    )
    model: nn.Module = TinyNet().to(device)
    device_ids = [device.index] if device.type == "cuda" else None
    ddp = DDP(model, device_ids=device_ids)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=args.lr)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    scaler = torch.amp.GradScaler(device.type) if args.scaler else None
    losses: list[torch.Tensor] = []  # kept on the device, read back once at the end
    norms: list[torch.Tensor] = []
    step, epoch = 0, 0
    started = time.perf_counter()
    while step < args.steps:
        if sampler is not None:
            sampler.set_epoch(epoch)
        for xb, yb in loader:
            if args.rank0_load and step == args.rank0_load and rank == 0:
                # a checkpoint restored on rank 0 only: DDP never broadcasts it again
                state = {k: v + 0.01 for k, v in model.state_dict().items()}
                model.load_state_dict(state)
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            autocast = (
                torch.autocast(device.type, dtype=dtype)
                if dtype is not None
                else contextlib.nullcontext()
            )
            with autocast:
                loss = F.cross_entropy(ddp(xb).float(), yb)
            norm = None
            if scaler is not None:
                scaler.scale(loss).backward()
                if args.clip == "before-unscale":
                    norm = nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
                    scaler.unscale_(optimizer)
                elif args.clip == "after-unscale":
                    scaler.unscale_(optimizer)
                    norm = nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                if args.clip != "none":
                    norm = nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
                optimizer.step()
            losses.append(loss.detach())
            if norm is not None:
                norms.append(norm.detach())
            step += 1
            if step >= args.steps:
                break
        epoch += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    loss_values = [float(v) for v in losses]
    norm_values = [float(v) for v in norms]
    out = {
        "steps": step,
        "epochs": epoch,
        "seconds": round(seconds, 3),
        "loss_first": loss_values[0] if loss_values else None,
        "loss_last": loss_values[-1] if loss_values else None,
        "loss_min": min(loss_values) if loss_values else None,
        "clip_norm_first": norm_values[0] if norm_values else None,
        "clip_norm_last": norm_values[-1] if norm_values else None,
        "scale_last": float(scaler.get_scale()) if scaler is not None else None,
        "param_dtype": str(next(model.parameters()).dtype),
    }
    if rank == 0:
        print(
            f"train_tiny: {step} steps in {seconds:.2f}s, loss {out['loss_first']:.4f} -> "
            f"{out['loss_last']:.4f}, scale {out['scale_last']}",
            flush=True,
        )
    # No DDP model may be alive when the group is destroyed (gloo can abort at exit).
    del ddp, model, optimizer
    gc.collect()
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rank, world, device = join(args)
    info: dict[str, Any] = {
        "rank": rank,
        "world_size": world,
        "backend": args.backend,
        "device": str(device),
        "amp": args.amp,
        "scaler": args.scaler,
        "clip": args.clip,
        "sampler": not args.no_sampler,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
    try:
        if args.selftest:
            info["selftest"] = selftest(rank, world, device)
            if rank == 0:
                got = info["selftest"]
                print(
                    f"selftest on {device} ({args.backend}): ok={got['ok']} "
                    f"failed={got['failed']} errors={got['errors']}",
                    flush=True,
                )
        else:
            info["train"] = train(args, rank, world, device)
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
        write_summary(args, rank, info)
        raise
    write_summary(args, rank, info)
    dist.destroy_process_group()
    failed = args.selftest and not info["selftest"]["ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
