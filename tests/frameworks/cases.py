"""Framework zoo runner: each ``tests/frameworks/<fw>/cases.yaml`` names scripts and causes.

A case is a tiny 2-rank CPU job written the way users of that framework write it (a model
built from a config, no downloads). Each runs once under ``ddpadvisor trace`` (real torchrun,
the agent on PYTHONPATH) and is diagnosed three ways: by the trace alone, by ``--script``
alone and by both together. The test modules (tests/test_frameworks_<fw>.py) and
bench/frameworks.py share this code.

cases.yaml::

    framework: accelerate          # the import name that must be installed
    cases:
      correct_loop.py: {cause: null}
      module_bypass.py: {cause: wrapper-bypassed-forward, args: ["--steps", "8"]}
      loader_not_prepared.py: {from: correct_loop.py, cause: no-distributed-sampler}

A case with ``from:`` is a faulty variant written from the notes ``# fault <its stem>: SPEC``
in the named script of the folder (the notation of tests/support/notes.py); it is not kept
as a file. :func:`materialise` writes it, with the folder's other files (except the case
scripts), into a temporary folder before it is traced or scanned.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "support"))
import notes  # noqa: E402  (tests/support/notes.py)

HELD_OUT = HERE.parent / "frameworks_heldout"
CONFIDENT = 0.30  # a catalogued cause first at or above this on a correct run is a false positive


@dataclass
class Case:
    framework: str
    script: Path
    cause: str | None
    args: list[str] = field(default_factory=list)
    # a variant (not kept as a file): the script whose `# fault <script stem>:` notes write it
    origin: Path | None = None

    @property
    def name(self) -> str:
        return f"{self.script.parent.name}/{self.script.name}"


@dataclass
class Ranked:
    ranking: list[str]
    scores: dict[str, float]

    def rank(self, cause: str) -> int | None:
        return self.ranking.index(cause) + 1 if cause in self.ranking else None

    def top(self, n: int = 3) -> str:
        return ", ".join(f"{c} {self.scores[c]:.2f}" for c in self.ranking[:n])


@dataclass
class Outcome:
    case: Case
    status: str
    failure: str | None
    seconds: float
    steps: dict[int, int]  # optimizer steps recorded per rank
    by_trace: Ranked
    by_script: Ranked
    by_both: Ranked
    facts: dict[str, Any]
    warnings: list[str]


def load_cases(folder: Path) -> list[Case]:
    spec = yaml.safe_load((folder / "cases.yaml").read_text())
    framework = spec["framework"]
    out = []
    for script, entry in sorted(spec["cases"].items()):
        entry = entry or {}
        origin = entry.get("from")
        if origin is not None and not (folder / origin).is_file():
            raise ValueError(f"{folder.name}/{script}: from: {origin} is not a file of the folder")
        out.append(
            Case(
                framework,
                folder / script,
                entry.get("cause"),
                list(entry.get("args", [])),
                None if origin is None else folder / origin,
            )
        )
    return out


def variant_source(case: Case) -> str:
    """The script of a variant case, written from its origin's ``# fault <stem>:`` notes."""
    assert case.origin is not None
    key = notes.fault(case.script.stem)
    text = case.origin.read_text()
    if key not in notes.keys(text):
        raise ValueError(f"{case.name}: {case.origin.name} has no '# {key}:' notes")
    return notes.written(text, key)


def materialise(case: Case, dest: Path) -> Case:
    """The case with a script on disk: a plain case as it is; a variant written as
    ``dest/<folder>/<script>`` beside copies of its folder's files that are not case scripts
    (trainer_args.json, helper modules)."""
    if case.origin is None:
        return case
    folder = case.origin.parent
    target = dest / folder.name
    target.mkdir(parents=True, exist_ok=True)
    scripts = set(yaml.safe_load((folder / "cases.yaml").read_text())["cases"])
    for sibling in folder.iterdir():
        if sibling.is_file() and sibling.name != "cases.yaml" and sibling.name not in scripts:
            shutil.copy2(sibling, target / sibling.name)
    script = target / case.script.name
    script.write_text(variant_source(case))
    return replace(case, script=script)


def framework_installed(folder: Path) -> bool:
    framework = yaml.safe_load((folder / "cases.yaml").read_text())["framework"]
    return importlib.util.find_spec(framework) is not None


def all_folders(root: Path = HERE) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/cases.yaml"))


def _ranked(diagnosis: Any) -> Ranked:
    return Ranked([c.id for c in diagnosis.causes], {c.id: c.score for c in diagnosis.causes})


def job_env() -> dict[str, str]:
    """The environment of a case's run: offline, quiet, one thread per rank."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("WANDB_DISABLED", "true")
    env.setdefault("OMP_NUM_THREADS", "1")
    # DeepSpeed jobs (tests/frameworks/deepspeed): the CPU accelerator, and the ops built once
    # per CI run (tests/support/deepspeed_ops.py); nothing else reads these
    env.setdefault("DS_ACCELERATOR", "cpu")
    if "TORCH_EXTENSIONS_DIR" not in env:
        import deepspeed_ops  # tests/support/deepspeed_ops.py

        env["TORCH_EXTENSIONS_DIR"] = str(deepspeed_ops.extensions_dir())
    return env


def run_case(engine: Any, case: Case, out: Path, *, echo: bool = False) -> Outcome:
    """Trace the case once on the real launch path (``ddpadvisor trace``: torchrun, the agent
    on PYTHONPATH) and diagnose it by the trace, by the script and by both. A variant is
    written beside ``out`` first (``<out>-script/``); the outcome's case names that file."""
    from ddpadvisor.tracing.launch import run_traced

    case = materialise(case, out.with_name(f"{out.name}-script"))
    started = time.monotonic()
    result = run_traced(
        [str(case.script), *case.args],
        out,
        nproc=2,
        echo=echo,
        stall=180,
        timeout=600,
        env=job_env(),
    )
    return diagnose_run(engine, case, out, result, time.monotonic() - started)


# What the server of the fork runner imports once for the cases of a framework.
PRELOAD = {
    "transformers": (
        "accelerate",
        "transformers.trainer",
        "transformers.hf_argparser",
        "transformers.models.llama.modeling_llama",
        "transformers.models.gpt2.modeling_gpt2",
        "transformers.models.bert.modeling_bert",
    ),
    "accelerate": ("accelerate", "accelerate.utils"),
    "lightning": ("lightning", "lightning.pytorch"),
    "torch": ("torch.distributed.fsdp", "torch.distributed.optim"),
}
PRELOAD["peft"] = (*PRELOAD["transformers"], "peft")
PRELOAD["deepspeed"] = ("deepspeed", *PRELOAD["transformers"])


def run_cases(
    engine: Any, cases: Iterable[Case], root: Path, workers: int = 2
) -> dict[str, Outcome]:
    """Every case traced once through the fork runner (tests/support/forkrun.py: torch and the
    framework imported once, the agent installed right after torch as in a real rank),
    ``workers`` jobs at a time (variants written under ``root/scripts`` first);
    :func:`real_launch_check` checks it against run_case."""
    from forkrun import Job, run_many

    cases = [materialise(c, root / "scripts") for c in cases]
    jobs = [
        Job(c.name, c.script, root / c.framework / c.script.stem, args=c.args, timeout=600)
        for c in cases
    ]
    preload = tuple(dict.fromkeys(m for c in cases for m in PRELOAD.get(c.framework, ())))
    results = run_many(jobs, workers=workers, preload=preload, env=job_env())
    return {
        c.name: diagnose_run(engine, c, job.out, results[c.name], results[c.name].seconds)
        for c, job in zip(cases, jobs)
    }


def diagnose_run(engine: Any, case: Case, out: Path, result: Any, seconds: float) -> Outcome:
    """The outcome of a traced run: steps per rank, and the diagnosis three ways."""
    from ddpadvisor.evidence.gather import Sources, gather
    from ddpadvisor.evidence.trace import load_trace, read_trace
    from ddpadvisor.report.present import diagnose

    steps: dict[int, int] = {}
    try:
        ranks, _meta, _warnings = load_trace(out)
        steps = {t.rank: len(t.steps) for t in ranks}
    except Exception:  # a failed run may leave no trace; status says why
        pass
    traced = read_trace(engine.kb, out)
    by_trace = diagnose(engine, traced.observations, warnings=traced.warnings)
    scanned = gather(engine.kb, Sources(scripts=[case.script]))
    by_script = diagnose(engine, scanned.observations, warnings=scanned.warnings)
    both = gather(engine.kb, Sources(scripts=[case.script], traces=[out]))
    by_both = diagnose(engine, both.observations, warnings=both.warnings)
    failure = None if result.failure is None else f"{result.failure.kind}: {result.failure.message}"
    return Outcome(
        case,
        result.status,
        failure,
        seconds,
        steps,
        _ranked(by_trace),
        _ranked(by_script),
        _ranked(by_both),
        {o.fact: o.value for o in both.observations},
        list(both.warnings),
    )


def zoo_module(name: str) -> tuple[list[Any], Any, Any]:
    """What tests/test_frameworks_<name>.py binds: its ``pytestmark``, the module fixture that
    traces every case of ``tests/frameworks/<name>`` once, and the per-case test of issue
    11's bar (a failure lists the facts the run produced)."""
    import pytest

    folder = HERE / name
    cases = load_cases(folder)
    framework = yaml.safe_load((folder / "cases.yaml").read_text())["framework"]
    marks = [
        pytest.mark.slow,
        pytest.mark.skipif(not framework_installed(folder), reason=f"{framework} is not installed"),
    ]

    @pytest.fixture(scope="module")
    def outcomes(tmp_path_factory: Any, engine: Any) -> dict[str, Outcome]:
        return run_cases(engine, cases, tmp_path_factory.mktemp(name))

    @pytest.mark.parametrize("case", cases, ids=[c.script.name for c in cases])
    def test_case(outcomes: dict[str, Outcome], case: Case) -> None:
        outcome = outcomes[case.name]
        assert problems(outcome) == [], facts_line(outcome)

    return marks, outcomes, test_case


def real_launch_check(name: str, script: str) -> tuple[Any, Any]:
    """What a zoo module binds, beside :func:`zoo_module`'s, to check that the fork runner
    measures what a real ``ddpadvisor trace`` measures: the module fixture ``real_launch``,
    which traces ``script`` once more through torchrun (:func:`run_case`), and the test that
    compares it with the fork runner's outcome of the same case (the module's ``outcomes``):
    same steps, same facts, same leading causes. The frameworks with the most import-time
    machinery carry it (the HF Trainer on accelerate, and Lightning, which reads the rank at
    import)."""
    import pytest

    (case,) = [c for c in load_cases(HERE / name) if c.script.name == script]

    @pytest.fixture(scope="module")
    def real_launch(tmp_path_factory: Any, engine: Any) -> Outcome:
        return run_case(engine, case, tmp_path_factory.mktemp(f"{name}-real") / case.script.stem)

    def test_fork_runner_measures_what_a_real_launch_measures(
        outcomes: dict[str, Outcome], real_launch: Outcome
    ) -> None:
        real, forked = real_launch, outcomes[case.name]
        assert real.status == forked.status == "ok", (real.failure, forked.failure)
        assert real.steps == forked.steps
        differ = {
            f: (forked.facts.get(f), real.facts.get(f))
            for f in set(real.facts) | set(forked.facts)
            if not _same(real.facts.get(f), forked.facts.get(f))
        }
        assert not differ, f"{case.name}: fact (fork runner, real launch): {differ}"
        assert real.by_trace.ranking[:3] == forked.by_trace.ranking[:3]

    return real_launch, test_fork_runner_measures_what_a_real_launch_measures


def _same(a: Any, b: Any) -> bool:
    """Equal; measured ratios within 10 % (two real launches of a Trainer job differ by a few
    per cent in synced_grad_norm_ratio: its run is not bit-for-bit repeatable)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 0.1 * max(abs(a), abs(b), 1e-9)
    return bool(a == b)


def problems(outcome: Outcome) -> list[str]:
    """What the acceptance bar of issue 11 says is wrong with this outcome (empty: fine)."""
    from ddpadvisor.engine.model import CATCH_ALL

    c = outcome.case
    found = []
    if outcome.status != "ok":
        return [f"{c.name}: run failed: {outcome.failure}"]
    if len(outcome.steps) < 2 or min(outcome.steps.values(), default=0) == 0:
        found.append(f"{c.name}: optimizer steps per rank {outcome.steps}")
    if c.cause is None:
        for how, ranked in (
            ("trace", outcome.by_trace),
            ("script", outcome.by_script),
            ("both", outcome.by_both),
        ):
            first = ranked.ranking[0]
            if first != CATCH_ALL and ranked.scores[first] >= CONFIDENT:
                found.append(f"{c.name}: correct run, but by {how} {ranked.top()}")
    else:
        if outcome.by_trace.rank(c.cause) != 1:
            found.append(
                f"{c.name}: {c.cause} by trace ranked {outcome.by_trace.rank(c.cause)}: "
                f"{outcome.by_trace.top()}"
            )
        r = outcome.by_script.rank(c.cause)
        if r is None or r > 3:
            found.append(f"{c.name}: {c.cause} by --script ranked {r}: {outcome.by_script.top()}")
    return found


def facts_line(outcome: Outcome) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(outcome.facts.items()))
