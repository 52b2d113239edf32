"""The framework zoos traced on 2 gloo ranks: steps, overhead and what the tool ranks first.

    python bench/frameworks.py [--framework NAME] [--held-out | --only-held-out]

Every case of tests/frameworks/*/cases.yaml (the tuned part) and, with --held-out, of
tests/frameworks_heldout/*/ (the held-out part; --only-held-out runs that part alone) runs
once under ``ddpadvisor trace`` through tests/frameworks/cases.py (``run_case``: the trace
diagnosed by the trace, by ``--script`` and by both) and once more without the agent (plain
``python -m torch.distributed.run``, the same environment) for the overhead. Both wall times
include start-up and imports. Cases run one after the other, so the two timings of a case
see the same machine; one run each is noisy on a shared machine (the load average is printed
with every part); bench/trace_overhead.py measures the per-step overhead properly.

Per case it prints the optimizer steps recorded per rank, traced vs plain wall time and the
overhead, the top cause and score by each of the three ways, and whether the case meets the
issue-11 bar (``cases.problems``). Per part it prints: correct runs with a confident false
positive, faults ranked first and in the top 3 by the trace, in the top 3 by ``--script``,
and first and in the top 3 by both (what ``ddpadvisor --json --trace DIR`` does: the trace
and a scan of the script it ran).
A framework that is not installed is reported as skipped. --framework matches a folder name
(hf_trainer, torch_stacks, ...) or the import name in cases.yaml (transformers, torch, ...).

``--keep DIR`` leaves every trace under DIR; ``--rediagnose DIR`` then launches nothing and
diagnoses those traces as the KB and readers stand now, in seconds: a calibration change is
re-measured on every kept run, correct ones included, before it lands.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FRAMEWORKS = REPO / "tests" / "frameworks"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(FRAMEWORKS))
os.environ.setdefault("DDPADVISOR_NO_USER_KB", "1")

import yaml  # noqa: E402
from cases import (  # noqa: E402  (tests/frameworks/cases.py)
    CONFIDENT,
    HELD_OUT,
    Case,
    Outcome,
    Ranked,
    all_folders,
    diagnose_run,
    framework_installed,
    load_cases,
    materialise,
    problems,
    run_case,
)

PLAIN_TIMEOUT_S = 600.0


@dataclass
class Row:
    case: Case
    outcome: Outcome | None
    plain_s: float | None
    plain_rc: int | None
    problems: list[str] = field(default_factory=list)
    error: str | None = None


def plain_env() -> dict[str, str]:
    """The environment run_case gives a traced run, without the agent's variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("HF_DATASETS_OFFLINE", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("WANDB_DISABLED", "true"),
        ("OMP_NUM_THREADS", "1"),
    ):
        env.setdefault(key, value)
    return env


def run_plain(case: Case, log: Path) -> tuple[float, int | None]:
    """Wall time and exit code of the case under plain torchrun (None: it timed out)."""
    from ddpadvisor.runs.command import torchrun_command

    cmd = torchrun_command([str(case.script), *case.args], nproc=2)
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, env=plain_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc: int | None = proc.wait(timeout=PLAIN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return time.monotonic() - started, rc


def first(ranked: Ranked) -> str:
    if not ranked.ranking:
        return "-"
    top = ranked.ranking[0]
    return f"{top} {ranked.scores[top]:.2f}"


def confident_false_positive(outcome: Outcome) -> bool:
    from ddpadvisor.engine.model import CATCH_ALL

    for ranked in (outcome.by_trace, outcome.by_script, outcome.by_both):
        if ranked.ranking:
            top = ranked.ranking[0]
            if top != CATCH_ALL and ranked.scores[top] >= CONFIDENT:
                return True
    return False


def selected(folder: Path, name: str | None) -> bool:
    if name is None:
        return True
    framework = yaml.safe_load((folder / "cases.yaml").read_text())["framework"]
    return name in (folder.name, framework)


@dataclass
class Kept:
    """What ``--rediagnose`` needs of a kept run besides its trace (``run.json`` beside it)."""

    status: str
    failure: Any
    seconds: float


def rediagnosed(engine: Any, case: Case, trace_dir: Path) -> Outcome:
    """A run kept by ``--keep``, diagnosed again with today's KB and readers (no launch)."""
    info = json.loads((trace_dir.parent / f"{trace_dir.name}.run.json").read_text())
    case = materialise(case, trace_dir.with_name(f"{trace_dir.name}-script"))
    kept = Kept(info["status"], None, info["seconds"])
    outcome = diagnose_run(engine, case, trace_dir, kept, info["seconds"])
    return replace(outcome, failure=info["failure"])


def keep(outcome: Outcome, trace_dir: Path) -> None:
    info = {"status": outcome.status, "failure": outcome.failure, "seconds": outcome.seconds}
    (trace_dir.parent / f"{trace_dir.name}.run.json").write_text(json.dumps(info))


def run_folder(
    engine: Any, folder: Path, out: Path, plain: bool = True, again: bool = False
) -> list[Row]:
    """Each case of the folder traced under ``out`` (``again``: the traces already there
    diagnosed anew, nothing launched)."""
    rows = []
    for case in load_cases(folder):
        trace_dir = out / folder.name / case.script.stem
        try:
            if again:
                outcome = rediagnosed(engine, case, trace_dir)
            else:
                outcome = run_case(engine, case, trace_dir)
                keep(outcome, trace_dir)
        except Exception as exc:  # a case that breaks the runner is reported, not fatal
            rows.append(Row(case, None, None, None, error=f"{type(exc).__name__}: {exc}"))
            print(f"  {case.script.name}: runner error: {type(exc).__name__}: {exc}", flush=True)
            continue
        # outcome.case names the script that ran (a variant written from notes: its copy)
        plain_log = out / "plain" / folder.name / f"{case.script.stem}.log"
        run_it = plain and not again
        plain_s, plain_rc = run_plain(outcome.case, plain_log) if run_it else (None, None)
        row = Row(case, outcome, plain_s, plain_rc, problems(outcome))
        rows.append(row)
        print_row(row)
    return rows


def print_row(row: Row) -> None:
    o = row.outcome
    assert o is not None
    steps = " ".join(f"r{r}={n}" for r, n in sorted(o.steps.items())) or "none"
    if row.plain_s is None and row.plain_rc is None:
        timing = f"traced {o.seconds:.1f} s (no plain run)"
    elif row.plain_s is None or row.plain_rc is None:
        timing = f"traced {o.seconds:.1f} s, plain timed out"
    else:
        overhead = 100.0 * (o.seconds - row.plain_s) / row.plain_s
        timing = f"traced {o.seconds:.1f} s, plain {row.plain_s:.1f} s ({overhead:+.0f} %)"
        if row.plain_rc != 0:
            timing += f", plain exit {row.plain_rc}"
    expected = row.case.cause or "correct"
    print(f"  {row.case.script.name}  [{expected}]", flush=True)
    print(f"    run {o.status}; steps {steps}; {timing}")
    if o.failure:
        print(f"    failure: {o.failure}")
    print(f"    trace:  {first(o.by_trace)}")
    print(f"    script: {first(o.by_script)}")
    print(f"    both:   {first(o.by_both)}")
    if row.case.cause is not None:
        print(
            f"    {row.case.cause}: rank by trace {o.by_trace.rank(row.case.cause)}, "
            f"by script {o.by_script.rank(row.case.cause)}, by both {o.by_both.rank(row.case.cause)}"
        )
    if row.problems:
        for p in row.problems:
            print(f"    bar: MISSED - {p}")
    else:
        print("    bar: met")


def ratio(k: int, n: int) -> str:
    return f"{k}/{n}" + (f" ({100.0 * k / n:.0f} %)" if n else "")


def within(ranked: Ranked, cause: str, n: int) -> bool:
    r = ranked.rank(cause)
    return r is not None and r <= n


def summary(part: str, rows: list[Row]) -> None:
    ran = [(r, r.outcome) for r in rows if r.outcome is not None]
    correct = [o for r, o in ran if r.case.cause is None]
    faults = [(r.case.cause, o) for r, o in ran if r.case.cause is not None]
    fp = sum(confident_false_positive(o) for o in correct)
    first_trace = sum(within(o.by_trace, c, 1) for c, o in faults)
    top3_script = sum(within(o.by_script, c, 3) for c, o in faults)
    top3_trace = sum(within(o.by_trace, c, 3) for c, o in faults)
    first_both = sum(within(o.by_both, c, 1) for c, o in faults)
    top3_both = sum(within(o.by_both, c, 3) for c, o in faults)
    steps_ok = sum(len(o.steps) >= 2 and min(o.steps.values()) > 0 for _, o in ran)
    timed = [(o.seconds, r.plain_s) for r, o in ran if r.plain_rc == 0 and r.plain_s]
    traced = sum(t for t, _ in timed)
    plain = sum(p for _, p in timed)
    met = sum(not r.problems for r, _ in ran)
    print(f"== summary, {part}")
    print(
        f"  cases run: {len(ran)} ({len(rows) - len(ran)} runner errors); bar met: {ratio(met, len(ran))}"
    )
    print(f"  runs with optimizer steps on every rank: {ratio(steps_ok, len(ran))}")
    print(f"  correct runs with a confident false positive: {ratio(fp, len(correct))}")
    print(f"  faults first by trace: {ratio(first_trace, len(faults))}")
    print(f"  faults top-3 by --script: {ratio(top3_script, len(faults))}")
    print(f"  faults top-3 by trace: {ratio(top3_trace, len(faults))}")
    print(f"  faults first by both: {ratio(first_both, len(faults))}")
    print(f"  faults top-3 by both: {ratio(top3_both, len(faults))}")
    if plain:
        print(
            f"  wall time, {len(timed)} cases: traced {traced:.0f} s, plain {plain:.0f} s "
            f"({100.0 * (traced - plain) / plain:+.0f} %)"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--framework", help="one folder (hf_trainer, ...) or import name (transformers, ...)"
    )
    part = ap.add_mutually_exclusive_group()
    part.add_argument("--held-out", action="store_true", help="the held-out zoo too")
    part.add_argument("--only-held-out", action="store_true", help="the held-out zoo alone")
    ap.add_argument(
        "--no-plain", action="store_true", help="skip the untraced run (no overhead figures)"
    )
    kept = ap.add_mutually_exclusive_group()
    kept.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep the traces under DIR (else a temp dir)"
    )
    kept.add_argument(
        "--rediagnose",
        type=Path,
        metavar="DIR",
        help="launch nothing: diagnose the traces an earlier --keep DIR run left, as the KB "
        "and readers are now (seconds, for calibration; the cases it did not run are errors)",
    )
    args = ap.parse_args(argv)

    parts: list[tuple[str, Path]] = []
    if not args.only_held_out:
        parts.append(("tuned", FRAMEWORKS))
    if args.held_out or args.only_held_out:
        parts.append(("held-out", HELD_OUT))

    chosen = [
        (name, [f for f in all_folders(root) if selected(f, args.framework)])
        for name, root in parts
    ]
    if args.framework and not any(folders for _, folders in chosen):
        print(
            f"bench/frameworks.py: no zoo folder matches --framework {args.framework}",
            file=sys.stderr,
        )
        return 2

    if args.rediagnose is not None and not args.rediagnose.is_dir():
        print(
            f"bench/frameworks.py: --rediagnose {args.rediagnose}: no such folder "
            "(it is what an earlier --keep run wrote)",
            file=sys.stderr,
        )
        return 2

    from ddpadvisor.service import load_engine

    engine = load_engine()
    with contextlib.ExitStack() as stack:
        if args.keep or args.rediagnose:
            tmp = str(args.keep or args.rediagnose)
        else:
            prefix = "ddpadvisor-bench-frameworks-"
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix))
        for (name, folders), (_, root) in zip(chosen, parts):
            rows: list[Row] = []
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"#### {name} zoo: {root.relative_to(REPO)} (load average {load})", flush=True)
            for folder in folders:
                framework = yaml.safe_load((folder / "cases.yaml").read_text())["framework"]
                if not framework_installed(folder):
                    print(
                        f"== {name} {folder.name} ({framework}): skipped, {framework} is not installed"
                    )
                    continue
                print(f"== {name} {folder.name} ({framework})", flush=True)
                rows += run_folder(
                    engine,
                    folder,
                    Path(tmp) / name,
                    plain=not args.no_plain,
                    again=args.rediagnose is not None,
                )
            summary(name, rows)
            print(f"  load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
