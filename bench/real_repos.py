"""The scan on real repositories as their users launch them: decided facts against hand-checked
truth, confident false positives on correct code, and injected DDP bugs (issue 29's bench).

Each file ``bench/real_repos/<owner>+<name>.yaml`` names one public repository at one commit,
the entry script its README launches (``entry``), what that launch fixes (``set``: answers as
``--set`` gives them; ``attach``: repository config files the launch reads, as ``--attach``
gives them), the hand-checked truth of the facts the scan may decide on the correct code
(``truth``: a value, or ``undecided`` where a flag, config or default the run may override
decides it, each with a ``why`` naming file:line), and one or two realistic DDP bugs a developer
makes there (``injections``: an exact-text edit and the KB cause it creates). The schema is
:class:`RepoCase`; ``tests/test_bench_real_repos.py`` checks every file against it and the KB.

Nothing fetched is committed here. The repositories come from bare git mirrors (``--mirrors``,
default ``/work/.mirror``, ``<owner>+<name>/repo``, as the workplace's fetch leaves them); each is
extracted at ``commit`` (its .py files and the .yaml/.yml/.json/.toml/.cfg files under 256 KiB)
into a cache outside this repository (``DDPADVISOR_SCRIPT_CACHE``). An injection is applied to a
hard-linked copy of that tree (the edited file is replaced, never written through), and the
entry is scanned as ``ddpadvisor --script ENTRY [--set ...] [--attach ...]`` would: through
``ddpadvisor.service.gather_sources`` and ``engine.diagnose``. ``ddpadvisor`` is imported from
the environment, so ``PYTHONPATH=/work/wt/OTHER python bench/real_repos.py`` measures that copy.

Held-out split, fixed before the first measurement: a batch-1 repository (``batch`` absent or 1)
is held out iff the first byte of ``sha256("ddpadvisor/real-repos/" + "owner/name")`` is below
0x70 (44 % expected). Batches 2 to 7 (``batch: 2`` to ``7``) are held out whatever the hash
says: fresh batches chosen and written by helpers who do not work on the scanner, batch 2
after batch 1's held-out part had been seen by those who do, batch 3 after batch 2 had been
measured, batch 4 after batch 3 had been, batch 5 after batch 4 had been, batch 6 after
batch 5 had been, batch 7 after batch 6 had been. Each YAML's ``part``
must agree (the test checks). Batches 1 to 6 have since been seen: batch 1's held-out part,
then batches 2 to 6 each after its blind measurement, were studied by the scanner work (batch
6 on 2026-12-07, after its two blind runs; see ``bench/real_repos/README.md``); their files
keep ``part: held_out``, but their figures now measure code that work has read, and only a
fresh batch written outside it (batch 7) measures the scan blind.
Truth values and injections are never changed after a measurement except to fix a factual
mistake (said in the commit body).

    python bench/real_repos.py [--part tuned|held_out|all] [--repo owner/name] [--batch 1|2|3|4|5|6|7]
                               [--bar 0.3] [--json FILE] [--check]

Prints, per part: correct code (repositories whose scan read no fact, the leading catalogued
cause and score, confident false positives: a catalogued cause leading at >= ``--bar``), decided
facts against truth (precision, each wrong fact, decided facts with no truth entry as UNCHECKED),
injections (rank of the expected cause, first / top-3, per stack and for the LLM stacks), and
seconds per scan. Exits 0; 2 with one line when no mirror is there.

Baseline on main at f475609 (details and the wrong facts in ``bench/real_repos/README.md``):
tuned 18 repositories: 0 read no fact, 0 confident false positives (1 lead on a real upstream
fault), decided-fact precision 329/338 (97.3 %), injections first 11/26, top 3 13/26 (LLM
stacks 7/18, 7/18); held out 13: 2 read no fact, 2 confident false positives, precision
143/158 (90.5 %), injections first 3/16, top 3 5/16 (LLM stacks 1/8, 1/8).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_saved_path = list(sys.path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from interview import MIRRORS, SCRIPT_CACHE  # noqa: E402

sys.path[:] = _saved_path  # interview.py puts this repository first; measure the env's copy

if TYPE_CHECKING:
    from ddpadvisor.engine.diagnose import Engine
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered, Observation
    from ddpadvisor.report.models import Diagnosis

CASES = Path(__file__).resolve().parent / "real_repos"
CACHE = SCRIPT_CACHE / "real_repos"
CATCH_ALL = "other"
UNDECIDED = "undecided"
HELD_OUT_SALT = "ddpadvisor/real-repos/"
HELD_OUT_BELOW = 0x70
LLM_STACKS = ("llm-finetune", "llm-pretrain", "rlhf")
STACKS = (*LLM_STACKS, "vision", "detection", "clip", "diffusion", "self-supervised", "speech")
LAYOUTS = (
    "single-script",
    "package-imports",
    "src-layout",
    "recipe-class",
    "trainer-class",
    "config-scheduler",
    "config-driven",
    "logging-wrapper",
    "hf-trainer",
    "accelerate",
    "fabric",
    "deepspeed-engine",
    "fsdp",
    "timm-factories",
    "runner",
)
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".cfg")
CONFIG_CAP = 256 * 1024
Value = bool | int | float | str


def held_out(repo: str) -> bool:
    """The fixed rule: held out iff sha256(salt + owner/name)'s first byte < 0x70."""
    return hashlib.sha256((HELD_OUT_SALT + repo).encode()).digest()[0] < HELD_OUT_BELOW


def expected_held_out(case: RepoCase) -> bool:
    """Batches 2 to 7 are held out as a whole; batch 1 follows the hash rule."""
    return case.batch >= 2 or held_out(case.repo)


def _rel_path(value: str) -> str:
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts or not value:
        raise ValueError(f"'{value}' is not a path inside the repository")
    return value


class Truth(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    value: Value
    why: str = Field(min_length=8)


class Injection(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    cause: str
    file: str
    old: str = Field(min_length=1)
    new: str
    note: str = Field(min_length=8)

    _file = field_validator("file")(_rel_path)


class RepoCase(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    repo: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    part: Literal["tuned", "held_out"]
    # 1: split by the hash rule; 2 to 7: held out whatever the hash says (chosen 2026-12-07 by
    # helpers who do not work on the scanner, after batch 1's held-out part had been seen).
    batch: Literal[1, 2, 3, 4, 5, 6, 7] = 1
    stack: Literal[STACKS]  # type: ignore[valid-type]
    layout: list[Literal[LAYOUTS]] = Field(min_length=1)  # type: ignore[valid-type]
    entry: str
    launch: str = Field(min_length=4)  # the README's command, for the reader
    set: dict[str, Value] = Field(default_factory=dict)
    attach: list[str] = Field(default_factory=list)  # [KIND:]path inside the repository
    truth: dict[str, Truth] = Field(default_factory=dict)
    # Catalogued causes the unmodified code really has at ``commit`` (cause -> file:line why):
    # such a cause leading on the correct code is a true finding, not a false positive.
    upstream_faults: dict[str, str] = Field(default_factory=dict)
    injections: list[Injection] = Field(min_length=1, max_length=2)

    _entry = field_validator("entry")(_rel_path)

    @field_validator("attach")
    @classmethod
    def _attach_paths(cls, value: list[str]) -> list[str]:
        for item in value:
            _rel_path(item.split(":", 1)[-1])
        return value

    @property
    def llm(self) -> bool:
        return self.stack in LLM_STACKS

    @property
    def name(self) -> str:
        return self.repo.replace("/", "+")


class CaseProblem(ValueError):
    """A case file that does not have the bench's form; the message is one line."""


def load_case(path: Path) -> RepoCase:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CaseProblem(f"{path.name}: not readable YAML: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise CaseProblem(f"{path.name}: must be a mapping")
    try:
        case = RepoCase.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CaseProblem(f"{path.name}: {where}: {first['msg']}") from None
    if path.stem != case.name:
        raise CaseProblem(f"{path.name}: file name must be {case.name}.yaml")
    if (case.part == "held_out") != expected_held_out(case):
        raise CaseProblem(
            f"{path.name}: part must be {'held_out' if expected_held_out(case) else 'tuned'}"
        )
    ids = [i.id for i in case.injections]
    if len(set(ids)) != len(ids):
        raise CaseProblem(f"{path.name}: injection ids repeat")
    return case


def load_cases(folder: Path = CASES) -> list[RepoCase]:
    return [load_case(p) for p in sorted(folder.glob("*.yaml"))]


def _fits(kb: KnowledgeBase, fact: str, value: Value) -> bool:
    f = kb.facts[fact]
    if f.type == "bool":
        return isinstance(value, bool)
    if f.type == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if f.type == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if f.type == "enum":
        return value in (f.values or [])
    return True


def kb_problems(case: RepoCase, kb: KnowledgeBase) -> list[str]:
    """What in a case the KB does not define: causes, facts, values of the fact's type."""
    out: list[str] = []
    for inj in case.injections:
        if inj.cause not in kb.causes:
            out.append(f"{case.name}: injection {inj.id}: cause '{inj.cause}' is not in the KB")
    for cause in case.upstream_faults:
        if cause not in kb.causes:
            out.append(f"{case.name}: upstream_faults: cause '{cause}' is not in the KB")
    for where, facts in (("truth", case.truth), ("set", case.set)):
        for fact, entry in facts.items():
            if fact not in kb.facts:
                out.append(f"{case.name}: {where}: fact '{fact}' is not in the KB")
                continue
            value = entry.value if isinstance(entry, Truth) else entry
            if not (where == "truth" and value == UNDECIDED) and not _fits(kb, fact, value):
                out.append(f"{case.name}: {where}: {fact}={value!r} is not a value of the fact")
    return out


# --- the repository on disk ---------------------------------------------------------------


def _extract(git_dir: Path, commit: str, folder: Path) -> bool:
    """The .py files and the config files under the cap of a mirror at ``commit``, written into
    ``folder`` whole or not at all. False when git cannot read them."""
    listed = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-l", "-z", commit],
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        return False
    wanted: list[tuple[str, str]] = []  # (blob, path)
    for entry in listed.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, raw = entry.partition(b"\t")
        mode, kind, blob, size = meta.split()
        path = raw.decode("utf-8", errors="replace")
        if kind != b"blob" or mode == b"120000" or not size.isdigit():
            continue
        suffix = PurePosixPath(path).suffix
        if suffix == ".py" or (suffix in CONFIG_SUFFIXES and int(size) <= CONFIG_CAP):
            wanted.append((blob.decode(), path))
    blobs = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
        input="".join(f"{b}\n" for b, _ in wanted).encode(),
        capture_output=True,
        check=False,
    )
    if blobs.returncode != 0:
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".part-"))
    try:
        data, at = blobs.stdout, 0
        for _, path in wanted:
            end = data.index(b"\n", at)
            header = data[at:end].split()
            if len(header) != 3:  # "<sha> missing": a mirror may lack its largest files
                at = end + 1
                continue
            size = int(header[2])
            target = tmp / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[end + 1 : end + 1 + size])
            at = end + 1 + size + 1
        try:
            tmp.rename(folder)
        except OSError:  # another run extracted it meanwhile: keep that complete copy
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


def checkout(case: RepoCase, mirrors: Path = MIRRORS, cache: Path = CACHE) -> Path | None:
    """The repository's code and config files at ``commit``, extracted once into the cache."""
    folder = cache / f"{case.name}@{case.commit[:12]}"
    if (folder / case.entry).is_file():
        return folder
    git_dir = mirrors / case.name / "repo"
    if not git_dir.is_dir() or not _extract(git_dir, case.commit, folder):
        return None
    return folder if (folder / case.entry).is_file() else None


def inject(folder: Path, inj: Injection, into: Path) -> str | None:
    """A hard-linked copy of ``folder`` at ``into`` with ``inj`` applied to a fresh file;
    None, or the one-line reason it cannot be applied."""
    shutil.copytree(folder, into, copy_function=os.link, symlinks=True)
    target = into / inj.file
    if not target.is_file():
        return f"{inj.file} is not in the repository"
    text = target.read_text(encoding="utf-8")
    count = text.count(inj.old)
    if count != 1:
        return f"its old text occurs {count} times in {inj.file}"
    target.unlink()  # never write through the link into the cache
    target.write_text(text.replace(inj.old, inj.new, 1), encoding="utf-8")
    return None


@dataclass
class Scan:
    observations: list[Observation]
    diagnosis: Diagnosis | None
    seconds: float
    error: str = ""

    @property
    def facts(self) -> dict[str, Observation]:
        return {o.fact: o for o in self.observations if o.source == "script"}

    def rank(self, cause: str) -> int:
        if self.diagnosis is None:
            return 0
        for out in self.diagnosis.causes:
            if out.id == cause:
                return out.rank
        return len(self.diagnosis.causes) + 1

    @property
    def lead(self) -> tuple[str, float]:
        if self.diagnosis is None or not self.diagnosis.causes:
            return ("-", 0.0)
        top = self.diagnosis.causes[0]
        return (top.id, top.score)


def scan(engine: Engine, case: RepoCase, folder: Path) -> Scan:
    """The entry scanned with the launch's --set and --attach, as the CLI gathers them."""
    from ddpadvisor.errors import InputError
    from ddpadvisor.evidence.gather import Sources
    from ddpadvisor.service import gather_sources

    def attached(item: str) -> str:
        kind, _, rel = item.rpartition(":")
        return f"{kind}:{folder / rel}" if kind else str(folder / rel)

    sources = Sources(
        scripts=[folder / case.entry],
        sets=[f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in case.set.items()],
        attach=[attached(a) for a in case.attach],
    )
    start = time.perf_counter()
    try:
        got = gather_sources(engine, sources)
    except InputError as exc:
        return Scan([], None, time.perf_counter() - start, exc.one_line())
    diagnosis = diagnose(engine, got)
    return Scan(list(got.observations), diagnosis, time.perf_counter() - start)


def diagnose(engine: Engine, got: Gathered) -> Diagnosis:
    """The diagnosis of gathered evidence as the CLI builds it: ``report.present.diagnose`` where
    the engine returns numbers, else the older ``Engine.diagnose``."""
    try:
        from ddpadvisor.report import present
    except ImportError:
        present = None  # type: ignore[assignment]
    build = getattr(present, "diagnose", None)
    args: tuple[Any, ...] = (engine, list(got.observations)) if build else (list(got.observations),)
    if build is None:
        build = engine.diagnose  # type: ignore[attr-defined]
    params = inspect.signature(build).parameters
    offered = {
        "warnings": getattr(got, "warnings", []),
        "declined": getattr(got, "declined", []),
        "verified": getattr(got, "verified", {}),
        "resemblance": getattr(got, "resemblance", []),
        "run_failed": getattr(got, "failed", False),
    }
    return build(*args, **{k: v for k, v in offered.items() if k in params})


def same(truth: Value, seen: Any) -> bool:
    if isinstance(truth, bool) or isinstance(seen, bool):
        return isinstance(truth, bool) and isinstance(seen, bool) and truth == seen
    if isinstance(truth, int | float) and isinstance(seen, int | float):
        return math.isclose(float(truth), float(seen), rel_tol=1e-9, abs_tol=1e-12)
    return str(truth) == str(seen)


# --- the run ------------------------------------------------------------------------------


@dataclass
class Tally:
    repos: int = 0
    blind: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    upstream: list[str] = field(default_factory=list)  # a real fault of the code, leading
    right: int = 0
    checked: int = 0
    wrong: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    ranks: list[tuple[str, bool, int]] = field(default_factory=list)  # stack, llm, rank
    broken: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)  # one per repository, for --json


def merged(tallies: list[Tally]) -> Tally:
    """One tally holding every count and list of ``tallies``."""
    out = Tally()
    for t in tallies:
        for f in fields(Tally):
            setattr(out, f.name, getattr(out, f.name) + getattr(t, f.name))
    return out


def _clean(text: str) -> str:
    """Text from a file or a scan, safe to print on a terminal."""
    return re.sub(r"[^\x20-\x7e]", "?", text)[:160]


def run_case(engine: Engine, case: RepoCase, folder: Path, bar: float, tally: Tally) -> None:
    tally.repos += 1
    got = scan(engine, case, folder)
    tally.seconds.append(got.seconds)
    if got.error:
        tally.errors.append(case.repo)
        print(f"  {case.repo}: correct code not scanned: {_clean(got.error)}")
    facts = got.facts
    if not facts:
        tally.blind.append(case.repo)
    cause, score = got.lead
    confident = cause not in (CATCH_ALL, "-") and score >= bar
    known = confident and cause in case.upstream_faults
    if known:
        tally.upstream.append(f"{case.repo}: {cause} {score:.2f}")
    elif confident:
        tally.false_positives.append(f"{case.repo}: {cause} {score:.2f}")
    notes: list[str] = []
    for fact, obs in sorted(facts.items()):
        truth = case.truth.get(fact)
        if truth is None:
            tally.unchecked.append(f"{case.repo}: {fact}={obs.value} ({obs.where})")
            notes.append(f"UNCHECKED {fact}={obs.value}")
            continue
        tally.checked += 1
        if truth.value != UNDECIDED and same(truth.value, obs.value):
            tally.right += 1
        else:
            tally.wrong.append(
                f"{case.repo}: {fact}={obs.value} ({obs.where}), truth {truth.value}"
            )
            notes.append(f"WRONG {fact}={obs.value} (truth {truth.value})")
    flag = "  (known upstream fault)" if known else "  CONFIDENT-FP" if confident else ""
    print(
        f"  {case.repo:40} facts {len(facts):2}  lead {cause} {score:.2f}{flag}  {got.seconds:.1f}s"
    )
    for n in notes:
        print(f"      {_clean(n)}")
    record: dict[str, Any] = {
        "repo": case.repo,
        "part": case.part,
        "stack": case.stack,
        "facts": {k: o.value for k, o in sorted(facts.items())},
        "notes": notes,
        "lead": [cause, round(score, 4)],
        "seconds": round(got.seconds, 3),
        "injections": [],
    }
    tally.records.append(record)
    for inj in case.injections:
        with tempfile.TemporaryDirectory(dir=CACHE, prefix=".inj-") as tmp:
            into = Path(tmp) / "tree"
            problem = inject(folder, inj, into)
            if problem:
                tally.broken.append(f"{case.repo}/{inj.id}")
                print(f"    inject {inj.id}: not applied: {_clean(problem)}")
                continue
            bad = scan(engine, case, into)
        tally.seconds.append(bad.seconds)
        if bad.error:
            print(f"    inject {inj.id}: not scanned: {_clean(bad.error)}")
        rank = bad.rank(inj.cause)
        tally.ranks.append((case.stack, case.llm, rank))
        top, top_score = bad.lead
        record["injections"].append(
            {"id": inj.id, "cause": inj.cause, "rank": rank, "lead": [top, round(top_score, 4)]}
        )
        shown = str(rank) if rank else "-"
        print(f"    inject {inj.id:34} {inj.cause:34} rank {shown:>3}  lead {top} {top_score:.2f}")


def _share(ranks: list[tuple[str, bool, int]], within: int) -> str:
    hit = sum(1 for _, _, r in ranks if 0 < r <= within)
    return f"{hit}/{len(ranks)}" + (f" ({100 * hit / len(ranks):.0f} %)" if ranks else "")


def summary(part: str, tally: Tally, bar: float) -> list[str]:
    lines = [f"== {part}: {tally.repos} repositories"]
    lines.append(
        f"correct code: read no fact {len(tally.blind)}"
        + (f" ({', '.join(tally.blind)})" if tally.blind else "")
        + f"; scan errors {len(tally.errors)}"
    )
    lines.append(
        f"confident false positives (catalogued cause >= {bar:.2f}): {len(tally.false_positives)}"
    )
    lines += [f"  {fp}" for fp in tally.false_positives]
    if tally.upstream:
        lines.append(f"leading with a fault the upstream code really has: {len(tally.upstream)}")
        lines += [f"  {u}" for u in tally.upstream]
    pct = f"{100 * tally.right / tally.checked:.1f} %" if tally.checked else "n/a"
    lines.append(
        f"decided facts: precision {tally.right}/{tally.checked} ({pct}); UNCHECKED {len(tally.unchecked)}"
    )
    lines += [f"  wrong: {_clean(w)}" for w in tally.wrong]
    lines += [f"  UNCHECKED: {_clean(u)}" for u in tally.unchecked]
    r = tally.ranks
    lines.append(
        f"injections: first {_share(r, 1)}, top 3 {_share(r, 3)}; not applied {len(tally.broken)}"
    )
    llm = [x for x in r if x[1]]
    lines.append(f"  LLM stacks: first {_share(llm, 1)}, top 3 {_share(llm, 3)}")
    for stack in sorted({s for s, _, _ in r}):
        mine = [x for x in r if x[0] == stack]
        lines.append(f"  {stack:16} first {_share(mine, 1)}, top 3 {_share(mine, 3)}")
    if tally.seconds:
        lines.append(
            f"seconds per scan: median {statistics.median(tally.seconds):.2f}, "
            f"max {max(tally.seconds):.2f} ({len(tally.seconds)} scans)"
        )
    return lines


def check(cases: list[RepoCase], mirrors: Path) -> int:
    """Every case's entry exists at its commit and every injection applies to exactly one place
    and leaves Python that parses; one line per problem. 0 when all hold, else 1."""
    bad = 0
    CACHE.mkdir(parents=True, exist_ok=True)
    for case in cases:
        folder = checkout(case, mirrors)
        if folder is None:
            print(f"{case.repo}: no mirror, or {case.entry} not at {case.commit[:12]}")
            bad += 1
            continue
        for rel in (a.rpartition(":")[2] for a in case.attach):
            if not (folder / rel).is_file():
                print(f"{case.repo}: attach {rel} not in the repository")
                bad += 1
        for inj in case.injections:
            with tempfile.TemporaryDirectory(dir=CACHE, prefix=".inj-") as tmp:
                into = Path(tmp) / "tree"
                problem = inject(folder, inj, into)
                if problem is None and inj.file.endswith(".py"):
                    try:
                        ast.parse((into / inj.file).read_text(encoding="utf-8-sig"))
                    except SyntaxError as exc:
                        problem = f"the edited {inj.file} does not parse (line {exc.lineno})"
            if problem:
                print(f"{case.repo}/{inj.id}: {_clean(problem)}")
                bad += 1
    print(f"{len(cases)} cases, {sum(len(c.injections) for c in cases)} injections, {bad} problems")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("tuned", "held_out", "all"), default="tuned")
    parser.add_argument("--repo", help="one repository (owner/name)")
    parser.add_argument(
        "--batch",
        type=int,
        choices=(1, 2, 3, 4, 5, 6, 7),
        help="only the cases of this batch (default: all)",
    )
    parser.add_argument("--mirrors", type=Path, default=MIRRORS, help="folder of bare git mirrors")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that every injection applies and leaves parseable Python (no scan)",
    )
    parser.add_argument(
        "--bar", type=float, default=0.3, help="a leading score counted as confident"
    )
    parser.add_argument(
        "--json", type=Path, help="also write every repository's facts and ranks to this file"
    )
    args = parser.parse_args(argv)

    try:
        cases = load_cases()
    except CaseProblem as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.repo:
        cases = [c for c in cases if c.repo == args.repo or c.name == args.repo]
        if not cases:
            print(f"error: no case for repository '{_clean(args.repo)}'", file=sys.stderr)
            return 2
    if args.batch:
        cases = [c for c in cases if c.batch == args.batch]
    if not any((args.mirrors / c.name / "repo").is_dir() for c in cases):
        print(f"error: no mirror (<owner>+<name>/repo) under {args.mirrors}", file=sys.stderr)
        return 2

    if args.check:
        return check(cases, args.mirrors)
    if args.json and args.json.exists():
        print(f"error: {args.json} exists; not overwritten", file=sys.stderr)
        return 2

    import ddpadvisor
    from ddpadvisor.service import load_engine

    engine = load_engine()
    problems = [p for c in cases for p in kb_problems(c, engine.kb)]
    for p in problems:
        print(f"warning: {p}")
    print(f"ddpadvisor from {Path(ddpadvisor.__file__).parent}")
    CACHE.mkdir(parents=True, exist_ok=True)
    parts = ("tuned", "held_out") if args.part == "all" else (args.part,)
    out: list[str] = []
    records: list[dict[str, Any]] = []
    for part in parts:
        by_batch: dict[int, Tally] = {}
        print(f"-- {part}")
        for case in (c for c in cases if c.part == part):
            folder = checkout(case, args.mirrors)
            if folder is None:
                print(
                    f"  {case.repo}: no mirror or commit {case.commit[:12]} not readable, skipped"
                )
                continue
            run_case(engine, case, folder, args.bar, by_batch.setdefault(case.batch, Tally()))
        tally = merged(list(by_batch.values()))
        out += summary(part, tally, args.bar)
        if len(by_batch) > 1:  # each batch of a mixed part on its own as well
            for batch in sorted(by_batch):
                out += summary(f"{part}, batch {batch}", by_batch[batch], args.bar)
        records += tally.records
    print("\n".join(out))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
