"""A realistic measure of the interview: real, resolved public reports replayed as users.

Each file in ``bench/interview_corpus/`` is one public report (a GitHub issue or PR, or a
forum thread) of a DDP training problem whose resolution the thread states. It records the
reporter's account (``narrative``, ``intake``), the cause the thread resolved to, and what that
reporter would answer to each question of the knowledge base, read from the narrative alone
(``answers``; anything not recorded is "don't know"), plus what a probe or trace would have
shown where the thread itself reports such a measurement (``measured``).

The replay starts from the facts the intake text yields (``ddpadvisor.evidence.intake`` when it
exists, otherwise none) and, at every step, the causes the whole pasted text reads like
(``ddpadvisor.evidence.intake.described``), as ``ask`` and the TUI's describe screen count them. The
simulated user confirms an extracted fact that agrees with their recorded answer, corrects one
that disagrees, and rejects one they have no answer for (it would put words in their mouth). Then it takes the tool's best next step at most ``--steps`` times:
``Diagnosis.next_steps`` when the engine offers it, else ``Diagnosis.next_questions``. Asked
steps are answered from ``answers``; probe, trace and scan steps from ``measured``, what the
thread itself reports a measurement or the code showing. That is the headline figure. A
second, generous figure lets such a step also read the reporter's recorded ``answers`` (a scan
of their script finding every code fact they stated, a probe confirming what they believed):
an upper bound on what running the tool's steps could add, not a measure. A step with no recorded value is declined and never taken again; when the engine's
``diagnose`` accepts a ``declined`` argument, the declined facts are passed to it.

A third figure gives a scan step what a user holding their script would get: where a case
names the script the reporter launched (``script``: repository, the commit before the fix, path)
and a bare git mirror of that repository is on disk (``--mirrors``, default ``/work/.mirror``,
``<owner>+<name>/repo``), the scan step runs the real scanner on that file and its folder's
Python files, read once into a cache outside the repository (``DDPADVISOR_SCRIPT_CACHE``).
Cases without one, or without the mirror, decline the scan step as in the headline. A fourth
line gives the same cases with the user scanning their script as the first step (it counts as
one), as a user who opens the tool with ``--script`` would. The last line gives every recorded
answer and measurement at once, after the intake: the most any order of questions could reach
with what these reporters know, so a gap between it and the headline is the question order's
and a gap above it is the knowledge base's. For the cases resolved outside the catalogue (cause
``other``), which no ranking can name, a line counts those where the catch-all stays in the top
3 and those where the tool claims no catalogued cause (its verdict is not ``cause``).

The ``split`` of every case was fixed when the corpus was collected (every third case in the
order the reports were found is held out). Tune on the ``tuned`` part only; report both.

    python bench/interview.py [--steps 8] [--verbose] [--json] [--mirrors DIR] [--numbers 96-110]

It prints figures and exits 0 (a malformed corpus file: one line, exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if TYPE_CHECKING:
    from ddpadvisor.engine.diagnose import Engine
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Observation
    from ddpadvisor.report.models import Diagnosis

CORPUS = Path(__file__).resolve().parent / "interview_corpus"
SPLITS = ("tuned", "heldout")
REQUIRED = ("url", "title", "narrative", "resolution", "cause", "split", "answers")
OPTIONAL = (
    "measured",
    "intake",
    "reviewed_unknown",
    "cause_note",
    "code",
    "code_source",
    "script",
    "script_note",
)
CATCH_ALL = "other"  # the engine's id for "no catalogued fault"
MEASURED_KINDS = ("probe", "trace", "scan", "script", "attach")  # attach: files this corpus lacks
SCAN_KINDS = ("scan", "script")
# Bare git mirrors of the reporters' repositories (<owner>+<name>/repo), as the workplace's
# fetch leaves them; the scripts are read from there and never committed here.
MIRRORS = Path(os.environ.get("DDPADVISOR_MIRRORS", "/work/.mirror"))
SCRIPT_CACHE = Path(
    os.environ.get("DDPADVISOR_SCRIPT_CACHE", Path.home() / ".cache" / "ddpadvisor-bench")
)


class CorpusProblem(ValueError):
    """A corpus file that does not have the form the replay needs."""


@dataclass(frozen=True)
class ScriptRef:
    """The script the reporter launched, as it was when the problem happened."""

    repo: str  # owner/name on GitHub
    commit: str  # 40 hex
    path: str  # inside the repository


@dataclass
class Case:
    path: Path
    url: str
    title: str
    narrative: str
    resolution: str
    cause: str
    split: str
    answers: dict[str, Any]
    measured: dict[str, Any] = field(default_factory=dict)
    intake: str = ""
    reviewed_unknown: list[str] = field(default_factory=list)
    cause_note: str = ""
    code: str = ""  # what the reporter's post showed of their code, pasted with the intake
    script: ScriptRef | None = None

    def pasted(self, with_code: bool) -> str:
        """What the user pastes: the intake text, and their code as a fenced block."""
        if with_code and self.code:
            return f"{self.intake}\n\n```python\n{self.code.rstrip()}\n```\n"
        return self.intake

    @property
    def name(self) -> str:
        return self.path.stem


def _mapping(path: Path, data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise CorpusProblem(f"{path}: '{key}' must be a mapping of fact id to value")
    return {str(k): v for k, v in value.items()}


def load_case(path: Path) -> Case:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise CorpusProblem(f"{path}{line}: not valid YAML") from exc
    except OSError as exc:
        raise CorpusProblem(f"{path}: cannot be read ({exc.strerror})") from exc
    if not isinstance(data, dict):
        raise CorpusProblem(f"{path}: a case file must be a mapping")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise CorpusProblem(f"{path}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise CorpusProblem(f"{path}: unknown field(s) {', '.join(unknown)}")
    for key in ("url", "title", "narrative", "resolution", "cause", "split"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise CorpusProblem(f"{path}: '{key}' must be non-empty text")
    if data["split"] not in SPLITS:
        raise CorpusProblem(f"{path}: split must be one of {', '.join(SPLITS)}")
    reviewed = data.get("reviewed_unknown") or []
    if not isinstance(reviewed, list) or not all(isinstance(f, str) for f in reviewed):
        raise CorpusProblem(f"{path}: 'reviewed_unknown' must be a list of fact ids")
    return Case(
        script=_script_ref(path, data.get("script")),
        path=path,
        url=data["url"].strip(),
        title=data["title"].strip(),
        narrative=data["narrative"].strip(),
        resolution=data["resolution"].strip(),
        cause=data["cause"].strip(),
        split=data["split"],
        answers=_mapping(path, data, "answers"),
        measured=_mapping(path, data, "measured"),
        intake=str(data.get("intake") or data["narrative"]).strip(),
        reviewed_unknown=list(reviewed),
        cause_note=str(data.get("cause_note") or "").strip(),
        code=str(data.get("code") or ""),
    )


def _script_ref(path: Path, value: Any) -> ScriptRef | None:
    if value is None or value == "none":
        return None
    if not isinstance(value, dict) or sorted(value) != ["commit", "path", "repo"]:
        raise CorpusProblem(f"{path}: 'script' must be 'none' or a mapping of repo, commit, path")
    repo, commit, where = (str(value[k]) for k in ("repo", "commit", "path"))
    if repo.count("/") != 1:
        raise CorpusProblem(f"{path}: script repo '{repo}' is not owner/name")
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise CorpusProblem(f"{path}: script commit must be 40 lowercase hex digits")
    if not where.endswith(".py") or where.startswith("/") or ".." in where.split("/"):
        raise CorpusProblem(f"{path}: script path '{where}' is not a .py file inside the repo")
    return ScriptRef(repo, commit, where)


def script_file(ref: ScriptRef, mirrors: Path = MIRRORS, cache: Path = SCRIPT_CACHE) -> Path | None:
    """The reporter's script on disk, with the Python files of its folder (its sibling imports).

    Read once from the repository's mirror into the cache; None when neither has it.
    """
    folder = cache / f"{ref.repo.replace('/', '+')}@{ref.commit[:12]}"
    target = folder / ref.path
    if target.is_file():
        return target
    git_dir = mirrors / ref.repo.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        return None
    top = str(PurePosixPath(ref.path).parent)
    if not extract_python(git_dir, ref.commit, folder, top):
        return None
    return target if target.is_file() else None


def extract_python(
    git_dir: Path,
    commit: str,
    folder: Path,
    top: str = ".",
    patterns: tuple[str, ...] = ("*.py",),
) -> bool:
    """The Python files (or the files matching ``patterns``) under ``top`` of a mirror at
    ``commit``, extracted into ``folder`` whole or not at all (a later run finds a complete
    copy). False when git cannot read them (a mirror may lack its largest files)."""
    specs = [f":(glob)**/{p}" if top == "." else f":(glob){top}/**/{p}" for p in patterns]
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", commit, "--", *specs],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".part-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


def load_cases(folder: Path = CORPUS) -> list[Case]:
    paths = sorted(folder.glob("*.yaml"))
    if not paths:
        raise CorpusProblem(f"{folder}: no case files (*.yaml) there")
    return [load_case(p) for p in paths]


# ------------------------------------------------------------------------------- replay
@dataclass
class Replay:
    case: Case
    intake_facts: list[str]  # "fact=value (confirmed|corrected|rejected|from code)"
    intake_counts: dict[str, int]
    rank_intake: int
    rank_final: int
    first_at: int | None  # steps taken when the true cause first ranked first
    steps: list[tuple[str, str, str]]  # (kind, fact, "answered" | "declined")
    reoffered: int  # times a declined fact came back among the offered steps
    stuck: bool  # every offered step had been declined before the budget ran out
    unrecorded: list[str]  # asked facts with no recorded answer and not reviewed
    verdict: str = "cause"  # the final diagnosis' verdict (cause, undecided, nothing-fits, ...)


def _intake_extractor() -> Any:
    try:
        module = importlib.import_module("ddpadvisor.evidence.intake")
    except ImportError:
        return None
    extract = getattr(module, "extract", None)
    return None if extract is None else _once_per_text(extract)


def _once_per_text(read: Any) -> Any:
    """``read(kb, text)`` computed once per text: every case is replayed six ways (headline,
    generous, without code, with its script, script first, every answer) over the same pasted
    text, and reading it is a fifth of the bench's time."""
    done: dict[tuple[int, str], tuple[KnowledgeBase, list[Any]]] = {}

    def once(kb: KnowledgeBase, text: str) -> list[Any]:
        key = (id(kb), text)
        held = done.get(key)
        if held is None or held[0] is not kb:  # the kb is kept, so its id is not reused
            held = done[key] = (kb, list(read(kb, text)))
        return held[1]

    return once


def _rank(diagnosis: Diagnosis, cause: str) -> int:
    for out in diagnosis.causes:
        if out.id == cause:
            return out.rank
    return len(diagnosis.causes) + 1


def _offered(diagnosis: Diagnosis, kb: KnowledgeBase) -> list[tuple[str, tuple[str, ...], str]]:
    """(kind, facts, step id) of every next step the diagnosis offers, best first.

    A question settles one fact; a probe, trace or scan step may name several (``facts``).
    """
    steps = getattr(diagnosis, "next_steps", None)
    out: list[tuple[str, tuple[str, ...], str]] = []
    if steps:
        for step in steps:
            fact = getattr(step, "fact", None)
            settles = getattr(step, "settles", None) or getattr(step, "facts", None) or []
            many = [fact] if fact else list(settles)
            facts = tuple(str(f) for f in many if str(f) in kb.facts)
            if facts:
                kind = str(getattr(step, "kind", "ask"))
                out.append((kind, facts, str(getattr(step, "id", "") or kind)))
        return out
    for q in diagnosis.next_questions:
        out.append(("ask" if q.how == "ask" else q.how, (q.fact,), f"ask:{q.fact}"))
    return out


@_once_per_text
def _resemblance(kb: KnowledgeBase, text: str) -> list[Any]:
    """The causes the pasted text reads like, as ``ask`` and the TUI read it
    (``ddpadvisor.evidence.intake.described``, else ``ddpadvisor.kb.resemblance``)."""
    try:
        intake = importlib.import_module("ddpadvisor.evidence.intake")
    except ImportError:
        intake = None
    if intake is not None and hasattr(intake, "described"):
        return list(intake.described(kb, [text]))
    try:
        module = importlib.import_module("ddpadvisor.kb.resemblance")
    except ImportError:
        return []
    return list(module.resemble(kb, [text]))


def _diagnose(
    engine: Engine,
    observations: list[Observation],
    declined: set[str],
    resemblance: list[Any] | None = None,
) -> Diagnosis:
    from ddpadvisor.report.present import diagnose

    params = inspect.signature(diagnose).parameters
    kwargs: dict[str, Any] = {}
    if "declined" in params:
        kwargs["declined"] = set(declined)
    if "resemblance" in params and resemblance:
        kwargs["resemblance"] = resemblance
    return diagnose(engine, list(observations), **kwargs)


def _scan(kb: KnowledgeBase, script: Path) -> list[Observation]:
    from ddpadvisor.evidence.script_scan import scan_script

    return list(scan_script(kb, script).observations)


def _observe(kb: KnowledgeBase, case: Case, fact: str, value: Any, where: str) -> Observation:
    from ddpadvisor.observation import observe

    obs = observe(kb, fact, value, "answer", where)
    if obs is None:
        raise CorpusProblem(f"{case.path}: {fact}: an explicit 'unknown' is the default; omit it")
    return obs


def replay(
    engine: Engine,
    case: Case,
    max_steps: int,
    extract: Any,
    generous: bool = False,
    with_code: bool = True,
    script: Path | None = None,
    script_first: bool = False,
    every_answer: bool = False,
) -> Replay:
    """Replay one case; ``script`` (the reporter's real file) lets a scan step run the scanner,
    and with ``script_first`` the user scans it as their first step, before any question. With
    ``every_answer`` every recorded answer and measurement counts from the start, after the
    intake: the most any order of questions can reach with what this reporter knows."""
    from ddpadvisor.kb.values import ValueProblem
    from ddpadvisor.observation import UnknownFact

    kb = engine.kb
    observations: list[Observation] = []
    intake_facts: list[str] = []
    counts = {"confirmed": 0, "corrected": 0, "rejected": 0, "from code": 0}
    unrecorded: list[str] = []
    if extract is not None:
        for item in extract(kb, case.pasted(with_code)):
            fact = str(item.fact)
            if fact not in kb.facts:
                continue
            recorded = case.answers.get(fact)
            if recorded is None and getattr(item, "origin", "text") == "code":
                # read from the code the reporter pasted, not put in their mouth: it stands
                # as a scan of that excerpt would
                outcome = "from code"
                observations.append(_observe(kb, case, fact, item.value, "intake code"))
            elif recorded is None:
                outcome = "rejected"
                if fact not in case.reviewed_unknown and fact not in unrecorded:
                    unrecorded.append(fact)
            else:
                try:
                    same = (
                        _observe(kb, case, fact, item.value, "intake").value
                        == _observe(kb, case, fact, recorded, "intake").value
                    )
                except (UnknownFact, ValueProblem):
                    same = False
                outcome = "confirmed" if same else "corrected"
                observations.append(_observe(kb, case, fact, recorded, "intake"))
            counts[outcome] += 1
            intake_facts.append(f"{fact}={item.value} ({outcome})")
    if every_answer:
        have = {o.fact for o in observations}
        for fact, value in {**case.answers, **case.measured}.items():
            if fact not in have:  # the intake's reading (a recorded value, or code) stands
                observations.append(_observe(kb, case, fact, value, f"{case.name} (every answer)"))
    declined: set[str] = set()
    ran: set[str] = set()  # probe, trace and scan steps already taken (run or declined)
    # the causes the user's own words read like count at every step, as in the TUI
    described = _resemblance(kb, case.pasted(with_code)) if extract is not None else []
    diagnosis = _diagnose(engine, observations, declined, described)
    rank_intake = _rank(diagnosis, case.cause)
    first_at = 0 if rank_intake == 1 else None
    taken: set[str] = {o.fact for o in observations}
    steps: list[tuple[str, str, str]] = []
    reoffered = 0
    stuck = False
    scanned = False
    if script_first and script is not None:
        scanned = True
        answered_first = []
        for obs in _scan(kb, script):
            if obs.fact not in taken:
                taken.add(obs.fact)
                observations.append(obs)
                answered_first.append(obs.fact)
        steps.append(
            ("script", "the launched script", "answered" if answered_first else "declined")
        )
        diagnosis = _diagnose(engine, observations, declined, described)
        if first_at is None and _rank(diagnosis, case.cause) == 1:
            first_at = len(steps)
    while len(steps) < max_steps:
        offered = _offered(diagnosis, kb)
        reoffered += sum(1 for _, facts, _ in offered for f in facts if f in declined)
        fresh = [o for o in offered if o[2] not in ran and any(f not in taken for f in o[1])]
        if not fresh:
            stuck = bool(offered)
            break
        kind, facts, step_id = fresh[0]
        answered = []
        if kind in SCAN_KINDS and script is not None and not scanned:
            scanned = True
            for obs in _scan(kb, script):
                if obs.fact not in taken:  # what the user already said stands
                    taken.add(obs.fact)
                    observations.append(obs)
                    answered.append(obs.fact)
        for fact in facts:
            if fact in taken:
                continue
            if kind in MEASURED_KINDS:
                fallback = case.answers.get(fact) if generous else None
                value = case.measured.get(fact, fallback)
                if value is None and "asked" in kb.facts[fact].sources:
                    # the step settled nothing here, but the user can still be asked it: a
                    # declined scan or probe declines the step, not its questions (as in the TUI)
                    continue
            else:
                value = case.answers.get(fact)
            taken.add(fact)
            if value is None:
                declined.add(fact)
                # a probe/trace/scan step the thread measured nothing for: the fact is still
                # reviewed when the narrative's answer to it is recorded
                if fact not in case.reviewed_unknown and fact not in case.answers:
                    unrecorded.append(fact)
            else:
                observations.append(_observe(kb, case, fact, value, f"{case.name} ({kind})"))
                answered.append(fact)
        if kind in MEASURED_KINDS:
            ran.add(step_id)  # a step is taken once
            if not answered:
                declined.add(step_id)  # the user declines the step itself, as the TUI's key d does
        label = ",".join(facts)
        steps.append((kind, label, "answered" if answered else "declined"))
        diagnosis = _diagnose(engine, observations, declined, described)
        if first_at is None and _rank(diagnosis, case.cause) == 1:
            first_at = len(steps)
    return Replay(
        case=case,
        intake_facts=intake_facts,
        intake_counts=counts,
        rank_intake=rank_intake,
        rank_final=_rank(diagnosis, case.cause),
        first_at=first_at,
        steps=steps,
        reoffered=reoffered,
        stuck=stuck,
        unrecorded=unrecorded,
        verdict=str(getattr(diagnosis, "verdict", "cause")),
    )


# ------------------------------------------------------------------------------- report
def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else "0/0"


def _median_to_first(results: list[Replay], max_steps: int) -> str:
    values = [r.first_at if r.first_at is not None else max_steps + 1 for r in results]
    if not values:
        return "-"
    med = statistics.median(values)
    return f">{max_steps}" if med > max_steps else f"{med:g}"


def summary(results: list[Replay], max_steps: int) -> list[str]:
    n = len(results)
    intake = {
        k: sum(r.intake_counts[k] for r in results) for k in ("confirmed", "corrected", "from code")
    }
    rejected = sum(r.intake_counts["rejected"] for r in results)
    recorded = sum(len(r.case.answers) for r in results)
    return [
        f"  cases                              {n}",
        f"  top-1 after <= {max_steps} steps              "
        f"{_pct(sum(r.rank_final == 1 for r in results), n)}",
        f"  top-3 after <= {max_steps} steps              "
        f"{_pct(sum(r.rank_final <= 3 for r in results), n)}",
        f"  median steps to first              {_median_to_first(results, max_steps)}",
        f"  top-3 from the intake text alone   {_pct(sum(r.rank_intake <= 3 for r in results), n)}",
        f"  intake facts confirmed/corrected/rejected  {intake['confirmed']}/"
        f"{intake['corrected']}/{rejected} (recorded answers in these cases: {recorded}); "
        f"read from pasted code {intake['from code']}",
    ]


def as_json(results: list[Replay], max_steps: int, extractor: bool) -> dict[str, Any]:
    def figures(part: list[Replay]) -> dict[str, Any]:
        n = len(part)
        return {
            "cases": n,
            "top1": sum(r.rank_final == 1 for r in part),
            "top3": sum(r.rank_final <= 3 for r in part),
            "median_steps_to_first": _median_to_first(part, max_steps),
            "intake_top3": sum(r.rank_intake <= 3 for r in part),
        }

    return {
        "max_steps": max_steps,
        "intake_extractor": extractor,
        "splits": {s: figures([r for r in results if r.case.split == s]) for s in SPLITS},
        "cases": [
            {
                "case": r.case.name,
                "split": r.case.split,
                "cause": r.case.cause,
                "rank_intake": r.rank_intake,
                "rank_final": r.rank_final,
                "verdict": r.verdict,
                "first_at": r.first_at,
                "steps": [{"kind": k, "fact": f, "outcome": o} for k, f, o in r.steps],
                "intake": r.intake_facts,
                "unrecorded": r.unrecorded,
                "stuck": r.stuck,
                "reoffered": r.reoffered,
            }
            for r in results
        ],
    }


def _print_splits(
    results: list[Replay],
    max_steps: int,
    rows: tuple[int, ...],
    with_script: dict[str, Path] | None = None,
) -> None:
    """One line per split with the chosen rows of :func:`summary`, spaces squeezed."""
    for split in SPLITS:
        part = [r for r in results if r.case.split == split]
        lines = summary(part, max_steps)
        shown = [" ".join(lines[i].split()) for i in rows]
        have = ""
        if with_script is not None:
            have = f" ({sum(1 for r in part if r.case.name in with_script)} with a script)"
        print(f"  {split}{have}: " + "; ".join(shown))


def _number(case: Case) -> int:
    return int(case.name.split("-", 1)[0])


def _number_range(text: str) -> tuple[int, int]:
    first, sep, last = text.partition("-")
    if not (sep and first.isdigit() and last.isdigit()) or int(first) > int(last):
        raise argparse.ArgumentTypeError(f"'{text}' is not FIRST-LAST, e.g. 96-110")
    return int(first), int(last)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="questions or steps per case")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="folder of case files")
    parser.add_argument("--verbose", action="store_true", help="print every step taken")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--numbers",
        type=_number_range,
        metavar="FIRST-LAST",
        help="replay only the cases numbered FIRST to LAST (one collection batch, e.g. 96-110)",
    )
    parser.add_argument(
        "--mirrors",
        type=Path,
        default=MIRRORS,
        help="folder of bare git mirrors (<owner>+<name>/repo) the reporters' scripts are read from",
    )
    args = parser.parse_args(argv)

    from ddpadvisor.errors import InputError
    from ddpadvisor.kb.values import ValueProblem
    from ddpadvisor.observation import UnknownFact
    from ddpadvisor.service import load_engine

    try:
        cases = load_cases(args.corpus)
        if args.numbers is not None:
            first, last = args.numbers
            cases = [c for c in cases if first <= _number(c) <= last]
            if not cases:
                raise CorpusProblem(f"{args.corpus}: no case numbered {first} to {last}")
        engine = load_engine()
        extract = _intake_extractor()
        for case in cases:
            if case.cause != CATCH_ALL and case.cause not in engine.kb.causes:
                raise CorpusProblem(f"{case.path}: cause '{case.cause}' is not in the KB")
        results = [replay(engine, case, args.steps, extract) for case in cases]
        generous = [replay(engine, case, args.steps, extract, True) for case in cases]
        no_code = [replay(engine, c, args.steps, extract, with_code=False) for c in cases]
        scripts = {c.name: script_file(c.script, args.mirrors) for c in cases if c.script}
        on_disk = {name: path for name, path in scripts.items() if path is not None}
        scanned = [
            replay(engine, c, args.steps, extract, script=on_disk.get(c.name)) for c in cases
        ]
        scan_first = [
            replay(engine, c, args.steps, extract, script=on_disk.get(c.name), script_first=True)
            for c in cases
        ]
        ceiling = [replay(engine, c, 0, extract, every_answer=True) for c in cases]
    except (CorpusProblem, InputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (UnknownFact, ValueProblem) as exc:
        print(f"error: a recorded answer does not fit the KB: {exc}", file=sys.stderr)
        return 2

    if args.json:
        doc = as_json(results, args.steps, extract is not None)
        doc["generous_splits"] = as_json(generous, args.steps, extract is not None)["splits"]
        doc["without_code_splits"] = as_json(no_code, args.steps, extract is not None)["splits"]
        doc["with_script_splits"] = as_json(scanned, args.steps, extract is not None)["splits"]
        doc["script_first_splits"] = as_json(scan_first, args.steps, extract is not None)["splits"]
        doc["every_answer_splits"] = as_json(ceiling, 0, extract is not None)["splits"]
        doc["scripts"] = {"recorded": len(scripts), "on_disk": len(on_disk)}
        print(json.dumps(doc, indent=2))
        return 0
    print(f"interview replay: {len(cases)} real reports, at most {args.steps} steps each")
    print(f"intake extractor: {'ddpadvisor.evidence.intake' if extract else 'none (no facts)'}")
    print()
    by_name = {r.case.name: r for r in scanned}
    print(f"{'case':34} {'split':7} {'cause':36} intake final first  unrecorded asked facts")
    for r in results:
        first = "-" if r.first_at is None else str(r.first_at)
        print(
            f"{r.case.name:34} {r.case.split:7} {r.case.cause:36} {r.rank_intake:>6} "
            f"{r.rank_final:>5} {first:>5}  {', '.join(r.unrecorded) or '-'}"
        )
        if args.verbose:
            if r.intake_facts:
                print(f"    intake: {', '.join(r.intake_facts)}")
            for kind, fact, outcome in r.steps:
                print(f"    {kind:6} {fact:40} {outcome}")
            if r.case.name in on_disk:
                s = by_name[r.case.name]
                first = "-" if s.first_at is None else str(s.first_at)
                print(f"    with its script: final {s.rank_final}, first {first}")
                for kind, fact, outcome in s.steps:
                    print(f"      {kind:6} {fact:40} {outcome}")
    print()
    for split in SPLITS:
        part = [r for r in results if r.case.split == split]
        print(f"{split}:")
        print("\n".join(summary(part, args.steps)))
    print()
    # An uncatalogued cause cannot rank; what the tool can do is not claim a catalogued one.
    print("resolved outside the catalogue (cause: other), after the steps:")
    for split in SPLITS:
        part = [r for r in results if r.case.split == split and r.case.cause == CATCH_ALL]
        print(
            f"  {split}: {len(part)} cases; catch-all in the top 3: "
            f"{sum(r.rank_final <= 3 for r in part)}; no catalogued cause claimed (verdict not "
            f"'cause', i.e. none leads at 0.30 or more): {sum(r.verdict != 'cause' for r in part)}"
        )
    print()
    with_code = sum(1 for c in cases if c.code)
    print(
        f"without the code ({with_code} of the {len(cases)} posts show code; pasted with the intake above):"
    )
    _print_splits(no_code, args.steps, (1, 2, 4))
    print()
    print(
        f"with the reporter's real script (a scan step runs the scanner on the launched file as it "
        f"was; {len(on_disk)} of {len(scripts)} recorded scripts read from {args.mirrors}):"
    )
    _print_splits(scanned, args.steps, (1, 2, 3), on_disk)
    print("  the same, the user scanning the script as their first step (it counts as one):")
    _print_splits(scan_first, args.steps, (1, 2, 3))
    print()
    print("generous (probe/trace/scan steps may also read the recorded answers; an upper bound):")
    _print_splits(generous, args.steps, (1, 2, 3))
    print()
    print(
        "every recorded answer and measurement given at once, after the intake (the most any"
        " order of questions can reach with what these reporters know):"
    )
    for split in SPLITS:
        part = [r for r in ceiling if r.case.split == split]
        top1 = _pct(sum(r.rank_final == 1 for r in part), len(part))
        top3 = _pct(sum(r.rank_final <= 3 for r in part), len(part))
        print(f"  {split}: top-1 {top1}; top-3 {top3}")
    print()
    reoffered = sum(r.reoffered for r in results)
    stuck = sum(r.stuck for r in results)
    unrecorded = sorted({f for r in results for f in r.unrecorded})
    print(f"declined facts offered again       {reoffered} (over all cases and steps)")
    print(f"cases stuck (all offers declined)  {stuck}")
    print(f"asked facts with no review yet     {len(unrecorded)}: {', '.join(unrecorded) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
