"""Which micro-batches a DeepSpeed optimizer step uses when the loop calls engine.step() only
once per its own accumulation window (kb cause deepspeed-step-per-accumulation-window).

    python bench/deepspeed_step_window.py [--world 1,2] [--stages 0,1,2,3] [--bf16] [--calls]

Needs deepspeed; runs on the CPU (DS_ACCELERATOR=cpu, gloo), one ``torch.distributed.run``
launch per world size (about 15 s each plus the first build of DeepSpeed's CPU comm op, which
is kept in ``$TORCH_EXTENSIONS_DIR``, default ``<venv>/torch_extensions``).

The model is a vector of weights, zero at the start, one weight per (rank, micro-batch): the
loss of micro-batch j on rank r is the weight w[r, j] itself, so its gradient is 1 there and 0
elsewhere. After plain SGD (lr 1, no momentum) the change of w[r, j] is minus the factor with
which micro-batch j of rank r entered the update. A correct data-parallel step over a window of
``gas`` micro-batches on R ranks gives every micro-batch of the window the factor 1/(gas R).

For each ZeRO stage, world size, optimizer (DeepSpeed's config section ``optimizer: SGD`` or a
client ``torch.optim.SGD``) and loop, the script prints, per optimizer step, which micro-batches
counted and with what factor, in units of 1/(gas R) (so 1 is correct), plus micro_steps and
global_steps after each engine.step() call and the number of lr-scheduler steps. Loops:

- ``every``: engine.backward and engine.step on every micro-batch (the documented loop);
- ``window``: engine.backward on every micro-batch, engine.step only when (i + 1) % accum == 0,
  with the loop's own accum = gas = 2 (the ported plain-PyTorch loop);
- ``set-boundary``: the window loop, with engine.set_gradient_accumulation_boundary(flag) before
  each backward (flag true on the window's last micro-batch);
- ``unmanaged``: the window loop with ``managed_gradient_accumulation: false`` in the config
  (DeepSpeed 0.19.4 and later).

Two more rows per stage set gradient_clipping to half the norm of a correct step and print the
norm DeepSpeed reports (n/a where the engine keeps none) and the norm of the applied update.
``--bf16`` turns bf16 on in the config; ``--calls`` prints every engine.step() call (whether
the optimizer stepped, micro_steps, global_steps) and which backward saw the boundary.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

GAS = 2  # gradient_accumulation_steps in the DeepSpeed config
ACCUM = 2  # the ported loop's own window
MICRO = 8  # micro-batches per rank per run


def _worker(out: str, stages: list[int], bf16: bool) -> None:
    import deepspeed
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    size = world * MICRO

    class OneWeightPerMicroBatch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(size))

        def forward(self, onehot: torch.Tensor) -> torch.Tensor:
            return (self.w * onehot).sum()

    def weights(engine: Any) -> list[float]:
        param = engine.module.w
        if hasattr(param, "ds_id"):  # ZeRO-3: gather the partitions
            with deepspeed.zero.GatheredParameters([param]):
                return [float(v) for v in param.detach().float().clone()]
        return [float(v) for v in param.detach().float()]

    def run(stage: int, optimizer: str, loop: str, clip: float) -> dict[str, Any]:
        result: dict[str, Any] = {
            "stage": stage,
            "world": world,
            "optimizer": optimizer,
            "loop": loop,
            "clip": clip,
        }
        torch.manual_seed(0)
        model = OneWeightPerMicroBatch()
        config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": GAS,
            "gradient_clipping": clip,
            "zero_optimization": {"stage": stage},
            "steps_per_print": 10**9,
            "zero_allow_untested_optimizer": True,  # SGD under ZeRO
        }
        if bf16:
            config["bf16"] = {"enabled": True}
        if loop == "unmanaged":
            config["managed_gradient_accumulation"] = False
        kwargs: dict[str, Any] = {}
        if optimizer == "config":
            config["optimizer"] = {"type": "SGD", "params": {"lr": 1.0, "momentum": 0.0}}
            kwargs["lr_scheduler"] = lambda opt: torch.optim.lr_scheduler.LambdaLR(
                opt, lambda step: 1.0
            )
        else:
            client = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.0)
            kwargs["optimizer"] = client
            kwargs["lr_scheduler"] = torch.optim.lr_scheduler.LambdaLR(client, lambda step: 1.0)
        try:
            engine, _, _, sched = deepspeed.initialize(
                model=model, model_parameters=model.parameters(), config=config, **kwargs
            )
        except (AssertionError, ValueError, NotImplementedError) as exc:
            result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
            return result
        before = weights(engine)
        calls: list[dict[str, Any]] = []
        boundaries: list[bool] = []
        for i in range(MICRO):
            onehot = torch.zeros(size)
            onehot[rank * MICRO + i] = 1.0
            if loop == "set-boundary":
                engine.set_gradient_accumulation_boundary((i + 1) % ACCUM == 0)
            boundaries.append(bool(engine.is_gradient_accumulation_boundary()))
            engine.backward(engine(onehot))
            if loop == "every" or (i + 1) % ACCUM == 0:
                steps = engine.global_steps
                engine.step()
                after = weights(engine)
                norm = engine.get_global_grad_norm()
                calls.append(
                    {
                        "after_micro_batch": i,
                        "stepped": engine.global_steps > steps,
                        "micro_steps": engine.micro_steps,
                        "global_steps": engine.global_steps,
                        "delta": [b - a for a, b in zip(before, after)],
                        "grad_norm": None if norm is None else float(norm),
                    }
                )
                before = after
        result["boundaries"] = boundaries
        result["calls"] = calls
        result["sched_steps"] = int(sched.last_epoch) if sched is not None else None
        engine.destroy()
        return result

    results = []
    # One correct step touches GAS micro-batches on each rank with factor 1/(GAS world):
    correct_norm = (GAS * world) ** 0.5 / (GAS * world)
    for stage in stages:
        for optimizer in ("config", "client"):
            for loop in ("every", "window"):
                results.append(run(stage, optimizer, loop, 0.0))
        for loop in ("set-boundary", "unmanaged"):
            results.append(run(stage, "client", loop, 0.0))
        for loop in ("every", "window"):
            results.append(run(stage, "client", loop, correct_norm / 2))
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.barrier()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(world: int, stages: list[int], bf16: bool, out: Path) -> list[dict[str, Any]]:
    env = dict(os.environ)
    env["DS_ACCELERATOR"] = "cpu"
    env.setdefault("TORCH_EXTENSIONS_DIR", str(Path(sys.prefix) / "torch_extensions"))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={world}",
        f"--master_port={_free_port()}",
        __file__,
        "--worker",
        str(out),
        "--stages",
        ",".join(map(str, stages)),
    ]
    if bf16:
        command.append("--bf16")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0 or not out.exists():
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("[rank")]
        tail = "\n".join(lines[-30:])
        raise SystemExit(f"world {world}: the DeepSpeed job failed (rc {done.returncode}):\n{tail}")
    data: list[dict[str, Any]] = json.loads(out.read_text())
    return data


def _counted(delta: list[float], world: int) -> list[tuple[int, int, float]]:
    """(rank, micro-batch, factor in units of 1/(gas world)) for every weight an update moved."""
    unit = 1.0 / (GAS * world)
    return [
        (*divmod(index, MICRO), -change / unit)
        for index, change in enumerate(delta)
        if abs(change) > 1e-9
    ]


def _describe(delta: list[float], world: int) -> str:
    """Which micro-batches an update used: 'm2,3 x1' when every rank gave the same micro-batches
    with one factor, else each as r<rank>m<micro-batch>x<factor>."""
    counted = _counted(delta, world)
    if not counted:
        return "-"
    factors = {round(f, 3) for _, _, f in counted}
    per_rank = {r: sorted(m for rr, m, _ in counted if rr == r) for r in range(world)}
    if len(factors) == 1 and all(v == per_rank[0] for v in per_rank.values()):
        return f"m{','.join(map(str, per_rank[0]))} x{factors.pop():g}"
    return " ".join(f"r{r}m{m}x{f:.3g}" for r, m, f in counted)


def _print(results: list[dict[str, Any]], calls: bool) -> None:
    print(
        f"{'world':>5} {'stage':>5} {'optimizer':9} {'loop':12} {'clip':>5} "
        f"{'step()':>6} {'opt steps':>9} {'sched':>5}  micro-batches per update (each rank), factor"
    )
    for res in results:
        clip = f"{res['clip']:.3g}" if res["clip"] else "-"
        head = (
            f"{res['world']:>5} {res['stage']:>5} {res['optimizer']:9} {res['loop']:12} {clip:>5} "
        )
        if "error" in res:
            print(f"{head}refused: {res['error']}")
            continue
        stepped = [c for c in res["calls"] if c["stepped"]]
        updates = " | ".join(_describe(c["delta"], res["world"]) for c in stepped)
        norms = ""
        if res["clip"]:
            shown = [c["grad_norm"] for c in stepped]
            applied = [sum(d * d for d in c["delta"]) ** 0.5 for c in stepped]
            reported = "n/a" if shown[0] is None else f"{shown[0]:.3g}"
            norms = f"  [grad norm {reported}, update norm {applied[0]:.3g}]"
        print(
            f"{head}{len(res['calls']):>6} {len(stepped):>9} {res['sched_steps']:>5}  "
            f"{updates}{norms}"
        )
        if calls:
            marks = "".join("B" if b else "." for b in res["boundaries"])
            print(f"        boundary seen by each backward (B = yes): {marks}")
            for call in res["calls"]:
                print(
                    f"        step() after mb {call['after_micro_batch']}: "
                    f"{'STEP' if call['stepped'] else 'no  '} micro_steps {call['micro_steps']}"
                    f" global_steps {call['global_steps']} | "
                    f"{_describe(call['delta'], res['world'])}"
                )


def _int_list(allowed: range) -> Any:
    def parse(text: str) -> list[int]:
        try:
            values = [int(part) for part in text.split(",")]
        except ValueError:
            message = f"{text!r} is not a comma-separated list of integers"
            raise argparse.ArgumentTypeError(message) from None
        bad = [v for v in values if v not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(
                f"{bad[0]} is outside {allowed.start}..{allowed.stop - 1}"
            )
        return values

    return parse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--world", type=_int_list(range(1, 9)), default=[1, 2], help="world sizes, e.g. 1,2"
    )
    parser.add_argument(
        "--stages", type=_int_list(range(4)), default=[0, 1, 2, 3], help="ZeRO stages, e.g. 0,2"
    )
    parser.add_argument("--bf16", action="store_true", help="bf16 in the DeepSpeed config")
    parser.add_argument("--calls", action="store_true", help="print every engine.step() call")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    stages: list[int] = args.stages
    if args.worker:
        _worker(args.worker, stages, args.bf16)
        return 0
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        print("deepspeed is not installed; nothing to measure")
        return 0
    import deepspeed as ds

    precision = "bf16" if args.bf16 else "fp32"
    print(
        f"deepspeed {ds.__version__}, {precision}; gradient_accumulation_steps {GAS}, "
        f"loop accum {ACCUM}"
    )
    print(
        "mN = micro-batch N of each rank; factor x1 = 1/(gas * world), the share a correct "
        "step gives each micro-batch"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for world in args.world:
            _print(_launch(world, stages, args.bf16, Path(tmp) / f"world{world}.json"), args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
