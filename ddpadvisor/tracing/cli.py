"""``ddpadvisor trace``: run the user's unmodified script under torchrun with the agent."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from pathlib import Path

from ddpadvisor.cliutil import Parser
from ddpadvisor.errors import InputError, RunFailed
from ddpadvisor.runs.options import count, seconds, word
from ddpadvisor.runs.outdir import choose, claimed
from ddpadvisor.tracing import DEFAULT_EVERY, ENV_DIR, ENV_EVERY, ENV_MAX_STEPS, agent_dir
from ddpadvisor.tracing.launch import DEFAULT_STALL_S, DEFAULT_TIMEOUT_S

DEFAULT_OUT = Path("ddpadvisor-trace")

EPILOG = """\
exit status: 0 the run finished (with --verify: and the cause is not ranked first);
1 --verify: the cause is still ranked first; 2 bad arguments; 3 a rank crashed, hung or was
killed, or --timeout passed (the partial trace is kept and still diagnoses); 128+N the run was
interrupted by signal N (SIGINT, SIGTERM, SIGHUP). No process of the run outlives the command,
whatever ends it, ddpadvisor being killed included.

Under your own launcher (torchrun, srun, several nodes), enable the same agent with
`ddpadvisor trace --print-env --out DIR` and run the job unchanged; see
ddpadvisor/tracing/README.md.
"""


def _parser() -> Parser:
    p = Parser(
        prog="ddpadvisor trace",
        description="Run a training script, unmodified, under `python -m torch.distributed.run` "
        "with the ddpadvisor agent injected, writing one JSONL trace per rank. Diagnose it "
        "with `ddpadvisor --json --trace DIR`.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--nproc",
        type=count(1),
        default=None,
        metavar="N",
        help="processes (default: GPUs, else 2)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where the trace goes: a new or empty folder (default {DEFAULT_OUT}, or "
        f"{DEFAULT_OUT}-2, -3, … when that one holds files; the folder used is printed)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a --out that holds files: earlier trace files there are replaced, "
        "other files are left alone",
    )
    p.add_argument(
        "--every",
        type=count(1),
        default=DEFAULT_EVERY,
        metavar="K",
        help=f"compare checksums across ranks every K optimizer steps (default {DEFAULT_EVERY}; "
        "also at steps 1, 2, 4, … below K)",
    )
    p.add_argument(
        "--max-steps",
        type=count(1),
        default=None,
        metavar="S",
        help="end the job after S optimizer steps",
    )
    p.add_argument(
        "--timeout",
        type=seconds(zero=True),
        default=DEFAULT_TIMEOUT_S,
        metavar="SEC",
        help=f"wall-clock limit of the run from its launch; every process is stopped after it "
        f"(default {DEFAULT_TIMEOUT_S:g}; 0: no limit)",
    )
    p.add_argument(
        "--stall",
        type=seconds(zero=True),
        default=DEFAULT_STALL_S,
        metavar="SEC",
        help="end the run when no rank made progress for SEC seconds, counted from the launch "
        f"(start-up output counts until every rank reports) (default {DEFAULT_STALL_S:g}; "
        "0: never)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="do not echo the job's output (it is in DIR/torchrun.log)",
    )
    p.add_argument(
        "--verify",
        type=word("a cause id (see `ddpadvisor kb graph`)"),
        metavar="CAUSE",
        default=None,
        help="after the run, diagnose the trace and exit 1 if CAUSE is still ranked first",
    )
    p.add_argument("--kb", dest="kb_dirs", action="append", type=Path, default=[], metavar="DIR")
    p.add_argument(
        "--print-env",
        action="store_true",
        help="print the shell lines that enable the agent under your own launcher, and exit",
    )
    p.add_argument("target", nargs=argparse.REMAINDER, help="-- train.py [args…] (or -m module …)")
    return p


def _default_nproc() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        n = len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
        return n or 2
    gpus = [p for p in Path("/dev").glob("nvidia[0-9]*")]
    return len(gpus) or 2


def print_env(out: Path, every: int, max_steps: int | None) -> str:
    lines = [
        f"export PYTHONPATH={shlex.quote(str(agent_dir()))}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export {ENV_DIR}={shlex.quote(str(out.resolve()))}",
        f"export {ENV_EVERY}={every}",
    ]
    if max_steps:
        lines.append(f"export {ENV_MAX_STEPS}={max_steps}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    target = list(args.target)
    if target and target[0] == "--":
        target = target[1:]
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError("--out exists and is not a folder", args.out)
    if args.print_env:
        sys.stdout.write(print_env(args.out or DEFAULT_OUT, args.every, args.max_steps))
        return 0
    if not target:
        raise InputError(
            "nothing to run: give the training script after --, e.g. -- train.py --lr 3e-4"
        )
    if target[0] == "-m":
        if len(target) < 2:
            raise InputError("-m needs a module name")
    else:
        script = Path(target[0])
        if not script.is_file():
            raise InputError("no such training script", script)
    nproc = args.nproc if args.nproc is not None else _default_nproc()
    engine = None
    if args.verify is not None:  # check the cause id before spending a run on it
        from ddpadvisor.service import load_engine

        engine = load_engine(args.kb_dirs)
        if engine.kb.resolve_cause(args.verify) is None:
            raise InputError(f"unknown cause id {args.verify!r} (see `ddpadvisor kb graph`)")

    with claimed(choose(args.out, DEFAULT_OUT), force=args.force, what="trace") as out:
        return _run(args, target, nproc, engine, out)


def _run(  # type: ignore[no-untyped-def]
    args: argparse.Namespace, target: list[str], nproc: int, engine, out: Path
) -> int:
    from ddpadvisor.tracing.launch import run_traced

    result = run_traced(
        target,
        out,
        nproc=nproc,
        every=args.every,
        max_steps=args.max_steps,
        timeout=args.timeout or None,
        stall=args.stall or None,
        echo=not args.quiet,
    )
    with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
        for warning in result.warnings:
            print(f"ddpadvisor trace: warning: {warning}", file=sys.stderr)
        print(
            f"ddpadvisor trace: {nproc} rank(s), {result.seconds:.1f} s, trace in {out}"
            f" — diagnose with: ddpadvisor --json --trace {shlex.quote(str(out))}",
            file=sys.stderr,
        )
    if result.failure is not None:
        if args.verify:
            print(f"verify: cannot verify {args.verify}: the run failed", file=sys.stderr)
        failed = RunFailed(f"{result.failure.message} (trace kept in {out})")
        if result.failure.kind == "interrupted" and result.signum is not None:
            failed.exit_code = 128 + result.signum
        raise failed
    no_steps = _no_optimizer_step(out)
    if no_steps is not None:
        if args.verify:
            print(f"verify: cannot verify {args.verify}: {no_steps}", file=sys.stderr)
        raise RunFailed(no_steps)
    if engine is not None:
        return _verify(engine, out, args.verify)
    return 0


def _no_optimizer_step(out: Path) -> str | None:
    """Why the trace is unusable when no rank recorded an optimizer step, else None."""
    from ddpadvisor.evidence.trace import load_trace

    try:
        ranks, _meta, _warnings = load_trace(out)
    except InputError:
        ranks = []
    if any(t.steps for t in ranks):
        return None
    if not any(t.records for t in ranks):
        why = (
            "no rank wrote a trace: the job never joined a process group with the agent "
            "loaded (does it call torch.distributed.init_process_group?"
            " See ddpadvisor/tracing/README.md for launchers that reset PYTHONPATH)"
        )
    else:
        why = (
            "no rank recorded an optimizer step: the job ended before training, or its "
            "optimizer does not step through torch.optim (try a longer run, or --max-steps)"
        )
    return f"trace unusable: {why} (trace kept in {out})"


def _verify(engine, out: Path, cause: str) -> int:  # type: ignore[no-untyped-def]
    """1 when the trace still ranks ``cause`` first, 0 when it measured what decides it and
    does not; "cannot verify" (exit 2) when it measured none of the facts the cause acts on."""
    from ddpadvisor.evidence.trace import read_trace
    from ddpadvisor.report.present import diagnose

    got = read_trace(engine.kb, out)
    kb = engine.kb
    cause_id = kb.resolve_cause(cause) or cause
    spec = kb.causes[cause_id]
    bearing = {link.fact for link in spec.evidence}
    for via in spec.via:
        mechanism = kb.mechanisms.get(via.mechanism)
        if mechanism is not None:
            bearing |= {link.fact for link in mechanism.evidence}
    measured = sorted(bearing & {o.fact for o in got.observations})
    if not measured:
        raise InputError(
            f"cannot verify {cause_id}: the trace measured none of the facts it acts on "
            f"({', '.join(sorted(bearing)) or 'none'}); run longer or trace the code path "
            "the fix changed"
        )
    diagnosis = diagnose(engine, got.observations, warnings=got.warnings)
    ids = [c.id for c in diagnosis.causes]
    rank = ids.index(cause_id) + 1 if cause_id in ids else None
    top = diagnosis.causes[0]
    if rank == 1:
        print(
            f"verify: FAILED: {cause_id} is still ranked first ({top.score:.0%}) by the trace",
            file=sys.stderr,
        )
        return 1
    print(
        f"verify: ok: {cause_id} is ranked {rank or 'nowhere'}; first is {top.id} ({top.score:.0%});"
        f" measured: {', '.join(measured)}",
        file=sys.stderr,
    )
    return 0
