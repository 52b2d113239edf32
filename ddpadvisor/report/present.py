"""The presenter: an :class:`~ddpadvisor.engine.diagnose.Inference` (numbers) becomes a
:class:`Diagnosis` in a language (titles, mechanisms, fixes, questions, the summary line).

The engine ranks and chooses; everything a person reads is written here, so a second
language or another output never touches inference.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ddpadvisor import __version__
from ddpadvisor.engine.diagnose import DESCRIPTION, ClaimStance, Engine, Inference
from ddpadvisor.engine.infer import Posterior
from ddpadvisor.engine.model import CATCH_ALL
from ddpadvisor.engine.questions import COMMANDS, Step, choice_labels, decline_hints
from ddpadvisor.i18n import Lang, t, text, value_label
from ddpadvisor.kb import levels
from ddpadvisor.kb.resemblance import Resemblance
from ddpadvisor.kb.schema import Fact
from ddpadvisor.observation import Observation
from ddpadvisor.report.models import (
    CauseOut,
    ClaimOut,
    CodeOut,
    Diagnosis,
    EvidenceItem,
    FactOut,
    FixOut,
    KBInfo,
    ModeOut,
    NextStep,
    QuestionOut,
    ResemblanceOut,
    SupersededValue,
    VerifyOut,
)

CATCH_ALL_TITLE = "No catalogued fault (healthy job, or a cause the KB does not know)"
CATCH_ALL_MECHANISM = (
    "Nothing observed so far points at a catalogued cause more than a healthy DDP job would. "
    "Either the job is fine (early noise, a normal fine-tuning curve) or the fault is not in the "
    "knowledge base yet: gather more evidence (a trace of the real job is the strongest)."
)
CATCH_ALL_NOTHING_FITS = (
    "Nothing catalogued fits (a symptom a healthy job rarely shows, but no known cause explains it)"
)
CATCH_ALL_HEALTHY = "Looks healthy (nothing observed departs from a normal DDP job)"
# A rule folder of thousands of causes would otherwise put every one in the output.
LIST_AT_MOST = 50


def diagnose(
    engine: Engine,
    observations: Iterable[Observation],
    *,
    warnings: list[str] | None = None,
    gpu_available: bool | None = None,
    top: int | None = None,
    declined: Iterable[str] = (),
    verified: Mapping[str, str] | None = None,
    resemblance: Sequence[Resemblance] = (),
    lang: Lang = "en",
    run_failed: bool = False,
) -> Diagnosis:
    """Infer on the observations and present the result in ``lang``."""
    inference = engine.infer(
        list(observations),
        gpu_available=gpu_available,
        declined=declined,
        verified=verified,
        resemblance=resemblance,
        run_failed=run_failed,
    )
    return present(
        engine, inference, warnings=warnings, gpu_available=gpu_available, top=top, lang=lang
    )


def conflict_warnings(inference: Inference, lang: Lang = "en") -> list[str]:
    """One line per disagreement between two observations of a fact, the winner named."""
    out = []
    for c in inference.resolved.conflicts:
        win, lose = c.winner, c.loser
        out.append(
            t(
                "{fact}: {winner} says {value}{where} and wins over {loser} {lvalue}{lwhere}",
                lang,
                fact=c.fact,
                winner=t(win.source, lang),
                value=value_label(win.value, lang),
                where=f" ({win.where})" if win.where else "",
                loser=t(lose.source, lang),
                lvalue=value_label(lose.value, lang),
                lwhere=f" ({lose.where})" if lose.where else "",
            )
        )
    return out


def present(
    engine: Engine,
    inference: Inference,
    *,
    warnings: list[str] | None = None,
    gpu_available: bool | None = None,
    top: int | None = None,
    lang: Lang = "en",
) -> Diagnosis:
    """The diagnosis a person reads (and ``--json`` prints) for one inference."""
    inf = inference
    post, ranking, winners = inf.posterior, inf.ranking, inf.winners
    notes = conflict_warnings(inf, lang)
    shown = ranking[:top] if top else ranking
    if top is None and len(ranking) > LIST_AT_MOST:
        shown = ranking[:LIST_AT_MOST]
        notes.append(
            f"listing the {LIST_AT_MOST} most likely of {len(ranking)} causes "
            "(--top N for another number, --top 0 for all)"
        )
    described = {r.cause: r for r in inf.resemblance}
    causes = [
        cause_out(engine, post, i, rank + 1, winners, inf.verdict, lang, described)
        for rank, i in enumerate(shown)
    ]
    asked = questions(
        engine,
        post,
        set(inf.observed) | set(inf.declined),
        gpu_available=gpu_available,
        winners=winners,
        lang=lang,
        steps=inf.steps,
    )
    superseded = inf.resolved.superseded
    facts = [fact_out(engine, o, superseded.get(f, []), lang) for f, o in sorted(winners.items())]
    lead = causes[0]
    nxt = inf.steps[0].id if inf.steps else ""
    title = lead.title.rstrip("。.")
    headline = (
        "No cause stands out yet; best so far: {cause} ({score}) — {title}. "
        if inf.verdict == "undecided"
        else "Most likely: {cause} ({score}) — {title}. "
    )
    summary = (
        t(headline, lang, cause=lead.id, score=f"{lead.score:.0%}", title=title)
        + t("{n} facts observed", lang, n=len(inf.observed))
        + (t(". Settled.", lang) if inf.done else t("; next: {fact}.", lang, fact=nxt))
    )
    kb = engine.kb
    return Diagnosis(
        lang=lang,
        version=__version__,
        kb=KBInfo(dirs=kb.dirs, causes=len(kb.causes), facts=len(kb.facts), claims=len(kb.claims)),
        summary=summary,
        done=inf.done,
        verdict=inf.verdict,  # type: ignore[arg-type]
        causes=causes,
        next_steps=[step_out(engine, st, lang) for st in inf.steps[:8]],
        declined=inf.declined,
        verified=inf.verified,  # type: ignore[arg-type]
        next_questions=asked,
        resemblance=[
            ResemblanceOut(
                cause=r.cause,
                score=round(r.score, 4),
                standout=round(r.standout, 3),
                words=list(r.words),
            )
            for r in inf.resemblance
        ],
        facts=facts,
        claims=[claim_out(engine, s, lang) for s in inf.claims],
        warnings=[*(warnings or []), *notes],
    )


def questions(
    engine: Engine,
    post: Posterior,
    observed: set[str],
    *,
    gpu_available: bool | None = None,
    allow: tuple[str, ...] = ("ask", "probe"),
    limit: int | None = 5,
    winners: Mapping[str, Observation] | None = None,
    lang: Lang = "en",
    steps: list[Step] | None = None,
) -> list[QuestionOut]:
    """Questions among the next steps, one per fact; ``observed`` facts (and declined ones
    passed in it) are never offered. Preconditions are judged on ``winners``."""
    known = dict(winners or {})
    out: list[QuestionOut] = []
    if steps is None:
        steps = engine.steps(post, known, declined=observed - set(known))
    for step in steps:
        if step.kind not in allow:
            continue
        for fid in step.facts if step.kind != "ask" else step.facts[:1]:
            if fid in observed or any(q.fact == fid for q in out):
                continue
            fact = engine.kb.facts[fid]
            gain = step.gains.get(fid, step.gain)
            out.append(
                QuestionOut(
                    fact=fid,
                    question=text(fact, "question", lang),
                    type=fact.type,
                    choices=choices_of(fact),
                    help=text(fact, "help", lang),
                    how=step.kind,  # type: ignore[arg-type]
                    probe=step.probe,
                    expected_gain=round(gain, 6),
                    cost=step.cost,
                    gain_per_cost=round(gain / step.cost, 6),
                )
            )
            if step.kind != "ask":
                break
    return out if limit is None else out[:limit]


def step_out(engine: Engine, step: Step, lang: Lang = "en") -> NextStep:
    if step.kind == "ask":
        fact = engine.kb.facts[step.facts[0]]
        labels = choice_labels(fact, lang) if fact.type in ("bool", "enum") else None
        return NextStep(
            id=step.id,
            kind="ask",
            title=text(fact, "question", lang).strip(),
            fact=fact.id,
            settles=[fact.id],
            choices=list(labels) if labels else None,
            labels=labels,
            help=(text(fact, "help", lang) or "").strip() or None,
            decline=decline_hints(step.id, step.kind),
            expected_gain=round(step.gain, 6),
            chance=step.chance,
            cost=step.cost,
            score=round(step.score, 6),
        )
    if step.kind == "probe":
        title = t("Run the {probe} probe", lang, probe=step.probe)
        command = f"ddpadvisor probe {step.probe} --nproc 2"
    elif step.kind == "trace":
        title = t("Trace your training script for a few steps", lang)
        command = COMMANDS["trace"]
    elif step.kind == "attach":
        title = t(
            "Attach a file you already have: the run's log or trainer_state.json, its "
            "config, its launch command or pip list",
            lang,
        )
        command = COMMANDS["attach"]
    else:
        title = t("Scan your training script", lang)
        command = COMMANDS["scan"]
    return NextStep(
        id=step.id,
        kind=step.kind,  # type: ignore[arg-type]
        title=title,
        settles=step.facts,
        help=t("Would settle: ", lang)
        + ", ".join(step.facts[:6])
        + (" ..." if len(step.facts) > 6 else ""),
        command=command,
        decline=decline_hints(step.id, step.kind),
        expected_gain=round(step.gain, 6),
        chance=step.chance,
        cost=step.cost,
        score=round(step.score, 6),
    )


def cause_out(
    engine: Engine,
    post: Posterior,
    i: int,
    rank: int,
    winners: Mapping[str, Observation],
    verdict: str = "cause",
    lang: Lang = "en",
    described: Mapping[str, Resemblance] | None = None,
) -> CauseOut:
    cid = post.causes[i]
    evidence = []
    for c in sorted(post.contributions.get(i, []), key=lambda c: -abs(c.log_lr)):
        if abs(c.log_lr) < 1e-9:
            continue
        size = round(c.log_lr / math.log(10), 4)
        direction = "for" if c.log_lr > 0 else "against"
        if c.fact == DESCRIPTION:
            r = (described or {})[cid]
            evidence.append(
                EvidenceItem(
                    fact=DESCRIPTION,
                    value=round(r.score, 4),
                    source="answer",
                    detail=t(
                        "your description reads like this cause: {words}",
                        lang,
                        words=", ".join(r.words),
                    ),
                    direction="for",
                    size=size,
                    path=[f"cause:{cid}", DESCRIPTION],
                )
            )
            continue
        if c.fact.startswith("verified."):
            fix_id = c.fact.split(".", 1)[1]
            evidence.append(
                EvidenceItem(
                    fact=c.fact,
                    value=c.cls,
                    source="answer",
                    detail=f"the verify command of fix {fix_id} {c.cls}",
                    direction=direction,
                    size=size,
                    path=[f"cause:{cid}", f"fix:{fix_id}"],
                )
            )
            continue
        obs = winners[c.fact]
        path = (
            max(c.paths, key=lambda p: p.weight).nodes(cid)
            if c.paths
            else [f"cause:{cid}", f"finding:{c.fact}"]
        )
        evidence.append(
            EvidenceItem(
                fact=c.fact,
                value=obs.value,
                source=obs.source,
                where=obs.where,
                detail=obs.detail,
                direction=direction,
                size=size,
                path=path,
            )
        )
    if cid == CATCH_ALL:
        title = {
            "nothing-fits": CATCH_ALL_NOTHING_FITS,
            "looks-healthy": CATCH_ALL_HEALTHY,
        }.get(verdict, CATCH_ALL_TITLE)
        return CauseOut(
            id=CATCH_ALL,
            title=t(title, lang),
            area="none",
            rank=rank,
            score=post.probs[i],
            prior=levels.CATCH_ALL_PRIOR,
            catch_all=True,
            mechanism=t(CATCH_ALL_MECHANISM, lang),
            evidence=evidence,
            fixes=[],
            references=[],
        )
    kb = engine.kb
    cause = kb.causes[cid]
    fixes = []
    for fid in cause.fixes:
        fix = kb.fixes[fid]
        fixes.append(
            FixOut(
                id=fix.id,
                title=text(fix, "title", lang),
                steps=text(fix, "steps", lang),
                code=CodeOut(before=fix.code.before, after=fix.code.after) if fix.code else None,
                verify=VerifyOut(command=fix.verify.command, expect=text(fix, "expect", lang)),
                cost=fix.cost,
            )
        )
    mode = None
    if i in post.leading and cause.modes:
        mid = engine.model.causes[post.leading[i]].rsplit("#", 1)[1]
        m = next(m for m in cause.modes if m.id == mid)
        mode = ModeOut(id=m.id, title=text(m, "title", lang))
    return CauseOut(
        id=cid,
        title=text(cause, "title", lang),
        area=cause.area,
        rank=rank,
        score=min(1.0, max(0.0, post.probs[i])),
        prior=levels.prior(cause.prior),
        mechanism=text(cause, "mechanism", lang).strip(),
        evidence=evidence,
        waits_on=post.held.get(i, []),
        mode=mode,
        fixes=fixes,
        references=[r.url for r in cause.references],
    )


def fact_out(
    engine: Engine, obs: Observation, losers: list[Observation], lang: Lang = "en"
) -> FactOut:
    fact = engine.kb.facts.get(obs.fact)
    return FactOut(
        fact=obs.fact,
        value=obs.value,
        source=obs.source,
        where=obs.where,
        detail=obs.detail,
        question=text(fact, "question", lang) if fact else obs.fact,
        superseded=[SupersededValue(value=o.value, source=o.source, where=o.where) for o in losers],
    )


def claim_out(engine: Engine, stance: ClaimStance, lang: Lang = "en") -> ClaimOut:
    claim = engine.kb.claims[stance.claim]
    if stance.stance == "refuted":
        why = t("Refuted by how PyTorch works (see reason)", lang) + (
            t("; your situation: {facts}", lang, facts=", ".join(stance.seen[:4]))
            if stance.seen
            else ""
        )
    elif stance.stance == "confirmed":
        why = t(
            "{cause} ranks #{rank} at {score} on this evidence",
            lang,
            cause=stance.cause,
            rank=stance.rank,
            score=f"{stance.score or 0.0:.0%}",
        )
    else:
        why = t(
            "Sound advice in general, but the evidence here rules out {causes}",
            lang,
            causes=", ".join(stance.causes),
        )
    return ClaimOut(
        id=claim.id,
        text=text(claim, "text", lang),
        provenance=claim.provenance,
        verdict=claim.verdict,
        stance=stance.stance,  # type: ignore[arg-type]
        reason=text(claim, "reason", lang).strip(),
        why_here=why,
        causes=list(stance.causes),
        references=[r.url for r in claim.references],
        experiment=claim.experiment,
    )


def choices_of(fact: Fact) -> list[str] | None:
    """The values a person picks from: a bool's two, an enum's own; None for a number."""
    if fact.type == "bool":
        return ["true", "false"]
    if fact.type == "enum":
        return list(fact.values or [])
    return None
