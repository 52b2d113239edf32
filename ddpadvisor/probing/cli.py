"""``ddpadvisor probe``: run the probes of probes/ in one torchrun launch.

    ddpadvisor probe [NAME ...] [--nproc N] [--backend auto|gloo|nccl] [--timeout S] [--out DIR]

Exit codes: 0 every rank finished every probe (whatever the probes found), 2 bad arguments,
3 the run failed (a rank hung, crashed or raised; run.json and the results written so far
stay in OUT), 128+N interrupted by signal N (SIGINT, SIGTERM, SIGHUP). No process of the run
outlives the command, whatever ends it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
from pathlib import Path

from ddpadvisor.bundled import probe_catalog
from ddpadvisor.cliutil import Parser
from ddpadvisor.errors import InputError
from ddpadvisor.runs.options import count, seconds, word
from ddpadvisor.runs.outdir import choose, claimed

PROBES = probe_catalog()
DEFAULT_OUT = Path("probe-results")


def _parser() -> Parser:
    p = Parser(
        prog="ddpadvisor probe",
        description="Run probes under torchrun (one launch for all of them) and write one JSON "
        "result per probe and rank to OUT. Read them with "
        "'ddpadvisor --json --probe-results OUT'.",
        epilog="probes: " + "; ".join(f"{k}: {v}" for k, v in PROBES.items()),
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="probes to run (default: all)")
    p.add_argument("--list", action="store_true", help="list the probes and exit")
    p.add_argument(
        "--nproc", type=count(1), default=None, help="ranks per node (default: GPUs or 2)"
    )
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument(
        "--timeout",
        type=seconds(zero=False),
        default=300.0,
        metavar="S",
        help="deadline for the whole run; every process is killed after it (default 300)",
    )
    p.add_argument(
        "--collective-timeout",
        type=seconds(zero=False),
        default=None,
        metavar="S",
        help="how long one collective may wait (default: half of --timeout, at most 60)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where the results go: a new or empty folder (default {DEFAULT_OUT}, or "
        f"{DEFAULT_OUT}-2, -3, … when that one holds files; the folder used is printed)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a --out that holds files: earlier results there are replaced, other "
        "files are left alone",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    multi = p.add_argument_group("multi-node (run the same command on every node)")
    multi.add_argument("--nnodes", type=count(1), default=1)
    multi.add_argument("--node-rank", type=count(0), default=None)
    multi.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT")
    multi.add_argument("--rdzv-id", type=word("an id"), default=None)
    user = p.add_argument_group("your training setup (makes the results evidence about it)")
    user.add_argument("--model", metavar="MODULE:FACTORY", help="checksums and scaler model")
    user.add_argument("--after-wrap", metavar="MODULE:FUNC", help="FUNC(ddp_model) after wrap")
    user.add_argument("--ddp-kwargs", metavar="JSON", help="DistributedDataParallel kwargs")
    user.add_argument("--steps", type=count(1), help="checksums: synthetic steps (default 3)")
    user.add_argument("--setup", metavar="MODULE:FUNC", help="seeds: your seeding function")
    user.add_argument("--dataset", metavar="MODULE:FACTORY", help="sampler: dataset/sampler")
    user.add_argument("--dataset-size", type=count(1))
    user.add_argument("--batch-size", type=count(1))
    user.add_argument("--seed", type=int, help="sampler seed")
    user.add_argument("--seed-per-rank", action="store_true")
    user.add_argument("--no-shuffle", action="store_true")
    user.add_argument("--drop-last", action="store_true")
    user.add_argument("--calls-set-epoch", choices=("yes", "no"))
    user.add_argument("--sizes", help="collective: comma-separated element counts")
    user.add_argument("--dtypes", help="collective: comma-separated dtypes")
    return p


def _gpu_count() -> int:
    """GPUs visible here, without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    gpus = Path("/proc/driver/nvidia/gpus")
    return len(list(gpus.iterdir())) if gpus.is_dir() else 0


def _check_spec(option: str, value: str | None, what: str) -> None:
    if value is not None and (":" not in value or value.endswith(":") or value.startswith(":")):
        raise InputError(f"{option} expects {what}, got {value!r}", option)


def probe_args(args: object) -> list[str]:
    """The options forwarded to the probes, as run_all.py expects them."""
    out: list[str] = []
    valued = (
        "model",
        "after_wrap",
        "ddp_kwargs",
        "steps",
        "setup",
        "dataset",
        "dataset_size",
        "batch_size",
        "seed",
        "calls_set_epoch",
        "sizes",
        "dtypes",
    )
    for name in valued:
        value = getattr(args, name)
        if value is not None:
            out += ["--" + name.replace("_", "-"), str(value)]
    for flag in ("seed_per_rank", "no_shuffle", "drop_last"):
        if getattr(args, flag):
            out.append("--" + flag.replace("_", "-"))
    return out


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        for name, text in PROBES.items():
            sys.stdout.write(f"{name:<11} {text}\n")
        return 0
    unknown = [n for n in args.names if n not in PROBES]
    if unknown:
        raise InputError(f"unknown probe {unknown[0]!r}; choose from {', '.join(PROBES)}", "NAME")
    names = [n for n in PROBES if n in args.names] if args.names else list(PROBES)
    for option, value, what in (
        ("--model", args.model, "MODULE:FACTORY"),
        ("--after-wrap", args.after_wrap, "MODULE:FUNC"),
        ("--setup", args.setup, "MODULE:FUNC"),
        ("--dataset", args.dataset, "MODULE:FACTORY"),
    ):
        _check_spec(option, value, what)
    if args.ddp_kwargs is not None:
        try:
            kwargs = json.loads(args.ddp_kwargs)
        except ValueError as exc:
            raise InputError(f"--ddp-kwargs is not JSON: {exc}", "--ddp-kwargs") from None
        if not isinstance(kwargs, dict):
            raise InputError("--ddp-kwargs must be a JSON object", "--ddp-kwargs")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError("--out exists and is not a folder", args.out)
    if importlib.util.find_spec("torch") is None:
        raise InputError("probes need PyTorch in this Python environment (pip install torch)")
    gpus = _gpu_count()
    if args.nproc is not None:
        nproc = args.nproc
    else:
        nproc = gpus if gpus and args.backend != "gloo" else 2
    if args.nnodes > 1 and not args.rdzv_endpoint:
        raise InputError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT", "--nnodes")
    collective = args.collective_timeout
    if collective is None:
        collective = min(60.0, max(args.timeout / 2, 1.0))
    if args.nnodes > 1:  # every node writes into the one folder (often shared): no claim
        return _run(args, names, nproc, collective, args.out or DEFAULT_OUT)
    with claimed(choose(args.out, DEFAULT_OUT), force=args.force, what="probe result") as out:
        return _run(args, names, nproc, collective, out)


def _run(
    args: argparse.Namespace, names: list[str], nproc: int, collective: float, out: Path
) -> int:
    from ddpadvisor.probing.launch import LaunchSpec, launch

    spec = LaunchSpec(
        probes=names,
        out=out,
        nproc=nproc,
        backend=args.backend,
        deadline_s=args.timeout,
        collective_timeout_s=collective,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
        probe_args=probe_args(args),
    )
    result = launch(spec, progress=None if args.quiet else sys.stderr)
    if result.failed:
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            sys.stderr.write(f"ddpadvisor probe: {result.message}\n")
            sys.stderr.write(f"ddpadvisor probe: details in {out / 'run.json'}\n")
        return result.exit_code
    if not args.quiet:
        note = " (a crash at exit after every result was written was ignored)"
        sys.stderr.write(
            f"ddpadvisor probe: {result.message}"
            + (note if result.teardown_crash_ignored else "")
            + f"; read with: ddpadvisor --json --probe-results {out}\n"
        )
    return 0
