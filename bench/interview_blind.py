"""The interview measured blind: real reports, written and answered by someone who saw only the
opening post, replayed through the tool's own steps.

``bench/interview_blind/NNN.yaml`` holds, for case NNN of ``bench/interview_corpus/``, what a
writer produced from the thread's opening post alone (never its replies, its resolution or the
corpus file): the post in their own words (``post``, the reporter's language), the code it
showed (``code``), and the reporter's answer sheet (``answers``: fact id -> value for the
questions they could answer from what they knew; anything else is "don't know"), plus
``measured`` (only measurements the post itself reports). The extractor who copied each opening
post never wrote that case; the cause each case resolved to was mapped by other people (the
corpus file's ``cause`` and ``split``, fixed when the corpus was collected). Pull-request
threads have no reporter's post and are not in this bench; cases where a writer saw anything of
the thread beyond its opening post were dropped (bench/interview_blind/README.md).

Replay, as a person at the prompt with a post and no script or cluster at hand:
1. The post (and its code, fenced) is read as ``--describe`` reads it: facts proposed with their
   phrases, and the causes the text reads like. The person confirms a proposal their sheet
   agrees with, corrects one it contradicts, and strikes one they never said (a fact read from
   their pasted code stays: it is their code).
2. Then at most ``--steps`` times the FIRST entry of ``next_steps``: a question is answered from
   the sheet or declined ("don't know"); a scan or trace is declined with ``--without script``
   (the bench holds no script), a probe with ``--without machine``, unless the post itself
   reported what that step measures (``measured``); an attach step reads the post itself as
   the file (a log or config pasted in it is a file the reporter has), and is declined with
   ``--set attach=unknown`` when that yields nothing.
Figures: top-1 and top-3 of the resolved cause after the steps, for the catalogued cases and
the cases resolved outside the catalogue (``other``), tuned beside held out. Tune on the tuned
part only.

    python bench/interview_blind.py [--steps 8] [--verbose] [--json] [--numbers 1-140]
                                    [--files DIR]

``--files DIR`` (issue 27's bench "with and without the files"): DIR holds the opening posts
verbatim as the extractors copied them (``NNN.txt``; quoted text of others, so kept outside the
project). For the catalogued cases whose post, read as a file, yields facts (a pasted log,
config or environment dump), the replay runs twice: the attach step reads that post, and the
attach step is declined; top-3 counts of both, tuned beside held out.

Exit 0 with figures; a malformed case file: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HERE = Path(__file__).resolve().parent
BLIND = HERE / "interview_blind"
CORPUS = HERE / "interview_corpus"
CATCH_ALL = "other"


class CaseProblem(ValueError):
    pass


@dataclass
class BlindCase:
    number: int
    path: Path
    post: str
    code: str
    answers: dict[str, Any]
    measured: dict[str, Any]
    cause: str  # mapped by others from the resolution (the corpus file)
    split: str

    def pasted(self) -> str:
        if self.code.strip():
            return f"{self.post}\n\n```python\n{self.code.rstrip()}\n```\n"
        return self.post


@dataclass
class Outcome:
    case: BlindCase
    rank: int
    rank_intake: int
    verdict: str
    steps: list[str] = field(default_factory=list)
    intake: list[str] = field(default_factory=list)


def _mapping(path: Path, data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise CaseProblem(f"{path}: '{key}' must be a mapping of fact id to value")
    return {str(k): v for k, v in value.items()}


def load_cases(folder: Path = BLIND, corpus: Path = CORPUS) -> list[BlindCase]:
    mapped: dict[int, tuple[str, str]] = {}
    for path in sorted(corpus.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        mapped[int(path.name.split("-", 1)[0])] = (str(data["cause"]), str(data["split"]))
    # cases collected for this bench alone (201 on): their causes, mapped by the collector
    extra = folder / "causes" / "mapped.yaml"
    if extra.is_file():
        for number, row in (yaml.safe_load(extra.read_text(encoding="utf-8")) or {}).items():
            mapped[int(number)] = (str(row["cause"]), str(row["split"]))
    out = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise CaseProblem(f"{path}{line}: not valid YAML") from exc
        if not isinstance(data, dict) or not isinstance(data.get("post"), str):
            raise CaseProblem(f"{path}: a blind case needs a mapping with a 'post' text")
        number = int(path.stem)
        if number not in mapped:
            raise CaseProblem(f"{path}: no corpus case numbered {number} maps its cause")
        cause, split = mapped[number]
        out.append(
            BlindCase(
                number=number,
                path=path,
                post=data["post"],
                code=str(data.get("code") or ""),
                answers=_mapping(path, data, "answers"),
                measured=_mapping(path, data, "measured"),
                cause=cause,
                split=split,
            )
        )
    return out


def attached(kb: Any, text: str) -> list[Any]:
    """What ``--attach`` reads from the post saved as a file (its logs, configs, commands)."""
    import tempfile

    from ddpadvisor.errors import InputError
    from ddpadvisor.evidence.sources.attach import read as read_attached

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "post.txt"
        path.write_text(text, encoding="utf-8")
        try:
            return list(read_attached(kb, path).observations)
        except InputError:
            return []


def _rank(diagnosis: Any, cause: str) -> int:
    ids = [c.id for c in diagnosis.causes]
    return ids.index(cause) + 1 if cause in ids else len(ids) + 1


def replay(engine: Any, case: BlindCase, max_steps: int, files: str | None = None) -> Outcome:
    """``files``: the text the attach step reads (the reporter's own pasted logs and configs);
    None reads the post as written; "" declines every attach step (no files at hand)."""
    from ddpadvisor.evidence.intake import described, extract, to_observations
    from ddpadvisor.kb.values import ValueProblem
    from ddpadvisor.observation import Observation, UnknownFact, observe
    from ddpadvisor.report.present import diagnose

    kb = engine.kb
    text = case.pasted()
    resemblance = described(kb, [text])

    def said(fact: str, value: Any, source: str, where: str) -> Observation | None:
        try:
            return observe(kb, fact, value, source, where)  # type: ignore[arg-type]
        except (UnknownFact, ValueProblem):
            return None

    observations: list[Observation] = []
    intake: list[str] = []
    for finding in extract(kb, text):
        sheet = case.answers.get(finding.fact)
        if sheet is not None:
            obs = said(finding.fact, sheet, "answer", "confirmed")
            if obs is not None:
                same = obs.value == finding.value
                intake.append(f"{finding.fact}={finding.value} ({'ok' if same else 'corrected'})")
                observations.append(obs)
        elif finding.origin == "code":
            observations.extend(to_observations([finding], f"case {case.number}"))
            intake.append(f"{finding.fact}={finding.value} (code)")
        else:
            intake.append(f"{finding.fact}={finding.value} (struck)")
    declined: list[str] = []
    diagnosis = diagnose(engine, observations, declined=declined, resemblance=resemblance)
    rank_intake = _rank(diagnosis, case.cause)
    steps: list[str] = []
    while len(steps) < max_steps and diagnosis.next_steps:
        step = diagnosis.next_steps[0]
        if step.kind == "ask":
            fact = step.fact or ""
            obs = (
                said(fact, case.answers[fact], "answer", "sheet") if fact in case.answers else None
            )
            if obs is None:
                declined.append(fact)
                steps.append(f"ask {fact}: don't know")
            else:
                observations.append(obs)
                steps.append(f"ask {fact}: {obs.value}")
        elif step.kind == "attach":
            # the reporter attaches what they pasted (a log or config in the post is a file they
            # have); a post that yields nothing as a file is declined
            have = {x.fact for x in observations}
            source = text if files is None else files
            got = [o for o in attached(kb, source) if o.fact not in have] if source else []
            if got:
                observations.extend(got)
                steps.append(f"attach: {', '.join(o.fact for o in got)} from the pasted text")
            else:
                declined.append("attach")
                steps.append("attach: declined (--set attach=unknown)")
        else:
            got = [
                o
                for f in step.settles
                if f in case.measured
                and (o := said(f, case.measured[f], step.kind.replace("scan", "script"), "post"))
            ]
            if got:
                observations.extend(got)
                steps.append(f"{step.id}: {', '.join(o.fact for o in got)} from the post")
            else:
                need = "machine" if step.kind == "probe" else "script"
                declined.append(f"without:{need}")
                steps.append(f"{step.id}: declined (--without {need})")
        diagnosis = diagnose(engine, observations, declined=declined, resemblance=resemblance)
    return Outcome(
        case, _rank(diagnosis, case.cause), rank_intake, diagnosis.verdict, steps, intake
    )


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else "0/0"


def figures(results: list[Outcome]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in ("tuned", "heldout"):
        part = [r for r in results if r.case.split == split]
        known = [r for r in part if r.case.cause != CATCH_ALL]
        other = [r for r in part if r.case.cause == CATCH_ALL]
        out[split] = {
            "cases": len(part),
            "catalogued": len(known),
            "top1": sum(r.rank == 1 for r in known),
            "top3": sum(r.rank <= 3 for r in known),
            "intake_top3": sum(r.rank_intake <= 3 for r in known),
            "other": len(other),
            "other_top3": sum(r.rank <= 3 for r in other),
            "other_no_claim": sum(r.verdict != "cause" for r in other),
        }
    return out


def with_and_without_files(
    engine: Any, cases: list[BlindCase], folder: Path, steps: int
) -> list[str]:
    """Figures for the cases whose reporter pasted something ``--attach`` reads (a log, a config,
    an environment dump: the opening post verbatim as the file), replayed with those files and
    with the attach step declined, tuned beside held out."""
    posts = {p.stem: p for p in folder.rglob("*.txt") if p.is_file()}
    lines = []
    for split in ("tuned", "heldout"):
        with_files = without = n = facts = 0
        for case in cases:
            post = posts.get(f"{case.number:03d}")
            if case.split != split or case.cause == CATCH_ALL or post is None:
                continue
            raw = post.read_text(encoding="utf-8", errors="replace")
            got = attached(engine.kb, raw)
            if not got:
                continue
            n += 1
            facts += len(got)
            with_files += replay(engine, case, steps, files=raw).rank <= 3
            without += replay(engine, case, steps, files="").rank <= 3
        lines.append(
            f"{split}: catalogued cases whose pasted files yield facts {n} ({facts} facts): "
            f"top-3 with the files {with_files}, without {without}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--verbose", action="store_true", help="print every case's steps (tuned only)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--numbers", default=None, metavar="FIRST-LAST")
    ap.add_argument("--blind", type=Path, default=BLIND)
    ap.add_argument(
        "--files",
        type=Path,
        default=None,
        metavar="DIR",
        help="the reporters' opening posts verbatim (DIR/**/NNN.txt, kept outside the project): "
        "also replay the cases whose pasted logs or configs yield facts, with and without them",
    )
    args = ap.parse_args(argv)
    from ddpadvisor.service import load_engine

    try:
        cases = load_cases(args.blind)
    except CaseProblem as exc:
        print(f"interview_blind: {exc}", file=sys.stderr)
        return 2
    if args.numbers:
        lo, hi = (int(x) for x in args.numbers.split("-", 1))
        cases = [c for c in cases if lo <= c.number <= hi]
    engine = load_engine([])
    results = [replay(engine, c, args.steps) for c in cases]
    fig = figures(results)
    if args.json:
        print(json.dumps(fig, indent=2))
        return 0
    for split, f in fig.items():
        print(
            f"{split}: {f['cases']} cases; catalogued {f['catalogued']}: top-1 "
            f"{_pct(f['top1'], f['catalogued'])}, top-3 {_pct(f['top3'], f['catalogued'])} after "
            f"<= {args.steps} steps, top-3 from the post alone "
            f"{_pct(f['intake_top3'], f['catalogued'])}; resolved outside the catalogue "
            f"{f['other']}: catch-all in the top 3 {f['other_top3']}, no cause claimed "
            f"{f['other_no_claim']}"
        )
    if args.files is not None:
        for line in with_and_without_files(engine, cases, args.files, args.steps):
            print(line)
    if args.verbose:  # held-out cases are never printed one by one
        for r in results:
            if r.case.split != "tuned":
                continue
            print(f"\n{r.case.number:03d} {r.case.cause}: rank {r.rank_intake} -> {r.rank}")
            print("  intake: " + "; ".join(r.intake))
            for s in r.steps:
                print(f"  {s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
