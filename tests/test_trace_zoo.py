"""The fault zoo: trace every script once, check what the trace measured and how it ranks.

tests/zoo/manifest.yaml maps each script to its injected cause (null for controls) and to the
facts the trace must measure. Three layers of checks, from the trace's own job to the KB's:

1. every run finishes and measures the listed facts (the agent and reader are right);
2. acceptance: the injected cause is ranked first for >= 90 % of faulty scripts and in the top
   3 for all; on controls no fault ranks above the catch-all;
3. the fix loop: the repaired twin (written from the script's ``# fix:`` notes by
   tests/zoo/twins.py) no longer ranks that cause first.

A table of the rankings is printed (pytest -s). Failures of 2 and 3 list the facts each case
produced, so KB calibration can be told from measurement.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from ddpadvisor.engine.model import CATCH_ALL
from ddpadvisor.evidence.trace import read_trace
from ddpadvisor.report.present import diagnose
from ddpadvisor.tracing.launch import run_traced

SUPPORT = Path(__file__).resolve().parent / "support"

ZOO = Path(__file__).resolve().parent / "zoo"
sys.path.insert(0, str(ZOO))
sys.path.insert(0, str(SUPPORT))
import twins  # noqa: E402  (tests/zoo/twins.py)
from forkrun import Job, run_many  # noqa: E402  (tests/support/forkrun.py)

MANIFEST = yaml.safe_load((ZOO / "manifest.yaml").read_text())["cases"]
FAULTY = sorted(n for n, c in MANIFEST.items() if c["cause"])
CONTROLS = sorted(n for n, c in MANIFEST.items() if not c["cause"])

pytestmark = pytest.mark.slow


# Traced on the real launch path too (torchrun, sitecustomize, the supervisor): the fork
# runner must measure what a real launch measures. One control, one that draws Python random
# numbers per rank, one no_sync case.
REAL_LAUNCH = ["control_mlp.py", "aug_same_rng.py", "nosync_flag_after_forward.py"]


def _entry(engine, result, out: Path) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    got = read_trace(engine.kb, out)
    diagnosis = diagnose(engine, got.observations, warnings=got.warnings)
    return {
        "result": result,
        "facts": {o.fact: o for o in got.observations},
        "ranking": [c.id for c in diagnosis.causes],
        "scores": {c.id: c.score for c in diagnosis.causes},
        "out": out,
    }


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, engine) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Trace each script and its fixed twin once (the fork runner, two jobs at a time), the
    REAL_LAUNCH scripts once more through ``run_traced``; diagnose each."""
    root = tmp_path_factory.mktemp("zoo")
    jobs = [Job(name, ZOO / name, root / name) for name in MANIFEST]
    fixed = root / "fixed-scripts"
    jobs += [Job(f"fixed/{n}", twins.write_fixed(n, fixed), root / f"fixed-{n}") for n in FAULTY]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}

    def real(name: str) -> tuple[str, Any]:
        out = root / f"real-{name}"
        return name, (run_traced([str(ZOO / name)], out, nproc=2, echo=False, env=env), out)

    with ThreadPoolExecutor(max_workers=1) as pool:  # beside the fork runner's two jobs
        real_runs = pool.map(real, REAL_LAUNCH)
        results = run_many(jobs, workers=2)
        reals = dict(real_runs)
    entries = {job.name: _entry(engine, results[job.name], job.out) for job in jobs}
    for name, (result, out) in reals.items():
        entries[f"real/{name}"] = _entry(engine, result, out)
    return entries


def _rank(entry: dict[str, Any], cause: str) -> int | None:
    ranking = entry["ranking"]
    return ranking.index(cause) + 1 if cause in ranking else None


def _facts_line(entry: dict[str, Any]) -> str:
    shown = []
    for fact, obs in sorted(entry["facts"].items()):
        value = str(obs.value).lower() if isinstance(obs.value, bool) else obs.value
        shown.append(f"{fact}={value}")
    return ", ".join(shown)


def _table(zoo: dict[str, dict[str, Any]]) -> str:
    lines = [f"{'script':32} {'expected cause':40} {'rank':>4}  top 3"]
    for name in FAULTY + CONTROLS:
        entry = zoo[name]
        cause = MANIFEST[name]["cause"] or CATCH_ALL
        top = ", ".join(f"{c} {entry['scores'][c]:.2f}" for c in entry["ranking"][:3])
        lines.append(f"{name:32} {cause:40} {_rank(entry, cause) or '-':>4}  {top}")
    return "\n".join(lines)


def test_every_zoo_run_finishes(zoo):  # type: ignore[no-untyped-def]
    bad = {n: e["result"].failure for n, e in zoo.items() if e["result"].status != "ok"}
    assert not bad, bad


@pytest.mark.parametrize("name", REAL_LAUNCH)
def test_real_launch_measures_what_the_fork_runner_measures(zoo, name):  # type: ignore[no-untyped-def]
    real, forked = zoo[f"real/{name}"], zoo[name]
    assert real["result"].status == "ok", real["result"].failure
    values = {f: o.value for f, o in forked["facts"].items()}
    differ = {
        f: (values.get(f), o.value) for f, o in real["facts"].items() if values.get(f) != o.value
    }
    differ.update({f: (v, None) for f, v in values.items() if f not in real["facts"]})
    assert not differ, f"{name}: fact (fork runner, real launch): {differ}"
    assert real["ranking"][:3] == forked["ranking"][:3]


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_trace_measures_the_listed_facts(zoo, name):  # type: ignore[no-untyped-def]
    entry = zoo[name]
    wrong = []
    for fact, want in MANIFEST[name].get("facts", {}).items():
        obs = entry["facts"].get(fact)
        got = None if obs is None else obs.value
        ok = got is not None and (got >= want["min"] if isinstance(want, dict) else got == want)
        if not ok:
            wrong.append(f"{fact}: want {want}, measured {got}")
    assert not wrong, f"{name}: " + "; ".join(wrong) + f"\n  all facts: {_facts_line(entry)}"


def test_zoo_ranking_meets_the_acceptance_bar(zoo):  # type: ignore[no-untyped-def]
    print("\n" + _table(zoo))
    ranks = {n: _rank(zoo[n], MANIFEST[n]["cause"]) for n in FAULTY}
    first = [n for n, r in ranks.items() if r == 1]
    problems = []
    share = len(first) / len(FAULTY)
    if share < 0.9:
        problems.append(f"injected cause first in {len(first)}/{len(FAULTY)} ({share:.0%} < 90 %)")
    for n, r in sorted(ranks.items()):
        if r is None or r > 3:
            problems.append(f"{n}: {MANIFEST[n]['cause']} ranked {r}")
    for n in CONTROLS:
        top = zoo[n]["ranking"][0]
        if top != CATCH_ALL:
            problems.append(f"control {n}: {top} ranked above the catch-all")
    if problems:
        detail = []
        for n in [*FAULTY, *CONTROLS]:
            r = ranks.get(n)
            if (n in ranks and r != 1) or (n in CONTROLS and zoo[n]["ranking"][0] != CATCH_ALL):
                detail.append(
                    f"  {n} (rank {r}, top {zoo[n]['ranking'][:3]}): {_facts_line(zoo[n])}"
                )
        pytest.fail("\n".join(problems) + "\nfacts of the cases that missed:\n" + "\n".join(detail))


@pytest.mark.parametrize("name", FAULTY)
def test_fixed_script_no_longer_ranks_the_cause_first(zoo, name):  # type: ignore[no-untyped-def]
    cause = MANIFEST[name]["cause"]
    entry = zoo[f"fixed/{name}"]
    assert entry["result"].status == "ok", entry["result"].failure
    assert entry["ranking"][0] != cause, (
        f"fixed/{name} still ranks {cause} first ({entry['scores'][cause]:.2f}); "
        f"facts: {_facts_line(entry)}"
    )


def test_verify_option_is_the_fix_loop_check(zoo, engine, capsys):  # type: ignore[no-untyped-def]
    from ddpadvisor.tracing.cli import _verify

    name = "no_sampler_mlp.py"
    cause = MANIFEST[name]["cause"]
    assert _verify(engine, zoo[name]["out"], cause) == 1
    assert _verify(engine, zoo[f"fixed/{name}"]["out"], cause) == 0
    err = capsys.readouterr().err
    assert f"verify: FAILED: {cause} is still ranked first" in err
    assert f"verify: ok: {cause} is ranked" in err
