"""From observations to a :class:`Diagnosis`: resolve conflicts, rank, explain, ask next."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ddpadvisor import __version__
from ddpadvisor.engine.infer import Contribution, Posterior, posterior
from ddpadvisor.engine.model import CATCH_ALL, CompiledModel, load_model, no_fault_distribution
from ddpadvisor.engine.questions import COMMANDS, Step, choice_labels, decline_hints, next_steps
from ddpadvisor.i18n import Lang, t, text, value_label
from ddpadvisor.kb import levels
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.resemblance import Resemblance, log_lr
from ddpadvisor.kb.values import ValueProblem, classify, condition_holds, parse_value
from ddpadvisor.observation import PRECEDENCE, Observation
from ddpadvisor.report.models import (
    CauseOut,
    ClaimOut,
    CodeOut,
    Diagnosis,
    EvidenceItem,
    FactOut,
    FixOut,
    KBInfo,
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
SETTLED = 0.85  # stop asking once the top cause has this posterior
# Below this posterior a leading catalogued cause is a best guess, not a diagnosis: the
# summary says no cause stands out yet (the same bar as "confident" in the quality checks).
STANDS_OUT = 0.30
MEASURED_OR_SCANNED = ("script", "probe", "trace")  # sources that saw the job itself
DESCRIPTION = "description"  # the evidence row of a description that reads like the cause
MIN_GAIN = 0.02  # bits; below this a question is not worth asking
# A fix whose verify command failed: P(fails | its cause, fix applied) vs P(fails | another
# cause). A correct fix can still fail its check (misapplied, a second fault), so not zero.
VERIFY_LR = {"failed": 0.15 / 0.9, "passed": 0.85 / 0.1}


@dataclass
class Resolved:
    winners: dict[str, Observation]
    superseded: dict[str, list[Observation]]
    warnings: list[str]


def resolve(observations: Iterable[Observation], lang: Lang = "en") -> Resolved:
    """Measured beats scanned beats asked; within a level the later observation wins."""
    winners: dict[str, Observation] = {}
    superseded: dict[str, list[Observation]] = {}
    warnings: list[str] = []
    for obs in observations:
        cur = winners.get(obs.fact)
        if cur is None or PRECEDENCE[obs.source] >= PRECEDENCE[cur.source]:
            if cur is not None:
                superseded.setdefault(obs.fact, []).append(cur)
            winners[obs.fact] = obs
        else:
            superseded.setdefault(obs.fact, []).append(obs)
    for fact, losers in superseded.items():
        win = winners[fact]
        for lose in losers:
            if lose.value != win.value:
                warnings.append(
                    t(
                        "{fact}: {winner} says {value}{where} and wins over {loser} {lvalue}{lwhere}",
                        lang,
                        fact=fact,
                        winner=t(win.source, lang),
                        value=value_label(win.value, lang),
                        where=f" ({win.where})" if win.where else "",
                        loser=t(lose.source, lang),
                        lvalue=value_label(lose.value, lang),
                        lwhere=f" ({lose.where})" if lose.where else "",
                    )
                )
    return Resolved(winners, superseded, warnings)


def _show(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


# A rule folder of thousands of causes would otherwise put every one in the output.
LIST_AT_MOST = 50
CLAIM_RANKS = 5  # a claim's cause counts as in contention among this many leaders


class Engine:
    """Facts, causes and the graph; nothing about files, torch or terminals."""

    def __init__(self, kb: KnowledgeBase, model: CompiledModel | None = None):
        self.kb = kb
        self.model = model or load_model(kb)
        self.cause_index = {c: i for i, c in enumerate(self.model.causes)}
        self._linked: dict[str, set[str]] = {}

    def linked_facts(self, cause: str) -> set[str]:
        """Facts the cause is linked to (directly or through a mechanism), found when first
        asked: a claim names a few causes of what may be thousands."""
        got = self._linked.get(cause)
        if got is None:
            ci = self.cause_index.get(cause)
            facts = self.model.facts.items()
            got = {fid for fid, t in facts if ci in t.likelihood} if ci is not None else set()
            self._linked[cause] = got
        return got

    # -- core -----------------------------------------------------------------------------
    def observed_classes(self, winners: dict[str, Observation]) -> dict[str, str]:
        return {
            f: classify(self.kb.facts[f], o.value) for f, o in winners.items() if f in self.kb.facts
        }

    def posterior(
        self,
        observations: Iterable[Observation],
        verified: Mapping[str, str] | None = None,
        resemblance: Sequence[Resemblance] = (),
    ) -> Posterior:
        winners = self.with_implied(resolve(observations).winners)
        extra = self.extra_terms(verified, resemblance)
        return posterior(self.model, self.observed_classes(winners), extra)

    def extra_terms(
        self, verified: Mapping[str, str] | None, resemblance: Sequence[Resemblance]
    ) -> dict[int, list[Contribution]]:
        """Evidence that bears on causes directly rather than through a fact: verified fixes
        and a description that reads like a cause."""
        out = self.verify_terms(verified)
        for ci, terms in self.resemblance_terms(resemblance).items():
            out.setdefault(ci, []).extend(terms)
        return out

    def resemblance_terms(
        self, resemblance: Sequence[Resemblance]
    ) -> dict[int, list[Contribution]]:
        """A description that reads like a cause's account counts for that cause, in
        proportion to how far its score stands out among the causes (kb/levels.py)."""
        out: dict[int, list[Contribution]] = {}
        for r in resemblance:
            ci = self.cause_index.get(r.cause)
            lr = log_lr(r)
            if ci is not None and lr > 0:
                out.setdefault(ci, []).append(Contribution(DESCRIPTION, "resembles", lr, ()))
        return out

    def with_implied(self, winners: dict[str, Observation]) -> dict[str, Observation]:
        """Winners plus the facts their answers settle (``implies``), where nothing else did."""
        out = dict(winners)
        for fid, obs in winners.items():
            fact = self.kb.facts.get(fid)
            if fact is None:
                continue
            for imp in fact.implies:
                if not condition_holds(fact, imp, obs.value):
                    continue
                for other, raw in imp.then.items():
                    spec = self.kb.facts.get(other)
                    if other in out or spec is None:
                        continue
                    try:
                        value = parse_value(spec, raw)
                    except ValueProblem:
                        continue
                    if value is not None:
                        out[other] = Observation(
                            fact=other,
                            value=value,
                            source=obs.source,
                            where=obs.where,
                            detail=f"implied by {fid} = {_show(obs.value)}",
                        )
        return out

    def verify_terms(self, verified: Mapping[str, str] | None) -> dict[int, list[Contribution]]:
        """Evidence from fixes whose verify command was run: a failure argues against the
        causes the fix addresses, a pass for them."""
        out: dict[int, list[Contribution]] = {}
        for fix_id, outcome in (verified or {}).items():
            lr = VERIFY_LR.get(outcome)
            if lr is None:
                continue
            for ci, cid in enumerate(self.model.causes):
                cause = self.kb.causes.get(cid)
                if cause is not None and fix_id in cause.fixes:
                    out.setdefault(ci, []).append(
                        Contribution(f"verified.{fix_id}", outcome, math.log(lr), ())
                    )
        return out

    def steps(
        self,
        post: Posterior,
        winners: Mapping[str, Observation],
        *,
        declined: Iterable[str] = (),
        gpu_available: bool | None = None,
        consulted: Iterable[str] = (),
    ) -> list[Step]:
        return next_steps(
            self.kb,
            self.model,
            post,
            winners,
            declined=declined,
            gpu_available=gpu_available,
            consulted=consulted,
        )

    def questions(
        self,
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
        """Questions among the next steps, one per fact; ``observed`` facts (and declined
        ones passed in it) are never offered. Preconditions are judged on ``winners``."""
        known = dict(winners or {})
        out: list[QuestionOut] = []
        if steps is None:
            steps = self.steps(post, known, declined=observed - set(known))
        for step in steps:
            if step.kind not in allow:
                continue
            for fid in step.facts if step.kind != "ask" else step.facts[:1]:
                if fid in observed or any(q.fact == fid for q in out):
                    continue
                fact = self.kb.facts[fid]
                gain = step.gains.get(fid, step.gain)
                out.append(
                    QuestionOut(
                        fact=fid,
                        question=text(fact, "question", lang),
                        type=fact.type,
                        choices=_choices(fact),
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

    def _step_out(self, step: Step, lang: Lang = "en") -> NextStep:
        if step.kind == "ask":
            fact = self.kb.facts[step.facts[0]]
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

    def diagnose(
        self,
        observations: list[Observation],
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
        res = resolve(observations, lang)
        winners = self.with_implied(res.winners)
        observed = self.observed_classes(winners)
        verified = {k: v for k, v in (verified or {}).items() if v in VERIFY_LR}
        resemblance = [r for r in resemblance if r.cause in self.cause_index]
        post = posterior(self.model, observed, self.extra_terms(verified, resemblance))
        described = {r.cause: r for r in resemblance}
        ranking = post.ranking()
        verdict = self._verdict(post, ranking[0], observed, winners)
        if run_failed and verdict == "looks-healthy":
            verdict = "undecided"  # a run that failed (or took no step) never looks healthy
        shown = ranking[:top] if top else ranking
        if top is None and len(ranking) > LIST_AT_MOST:
            shown = ranking[:LIST_AT_MOST]
            res.warnings.append(
                f"listing the {LIST_AT_MOST} most likely of {len(ranking)} causes "
                "(--top N for another number, --top 0 for all)"
            )
        causes = [
            self._cause_out(post, i, rank + 1, winners, verdict, lang, described)
            for rank, i in enumerate(shown)
        ]
        skip = sorted(set(declined) - set(winners))
        consulted = {o.source for losers in res.superseded.values() for o in losers}
        steps = self.steps(
            post, winners, declined=skip, gpu_available=gpu_available, consulted=consulted
        )
        questions = self.questions(
            post,
            set(observed) | set(skip),
            gpu_available=gpu_available,
            winners=winners,
            lang=lang,
            steps=steps,
        )
        done = self._settled(post, ranking[0], observed, verified, resemblance) or (
            not steps or steps[0].gain < MIN_GAIN
        )
        facts = [
            self._fact_out(o, res.superseded.get(f, []), lang) for f, o in sorted(winners.items())
        ]
        claims = self.claims(post, set(observed), lang)
        lead = causes[0]
        nxt = steps[0].id if steps else ""
        title = lead.title.rstrip("。.")
        headline = (
            "No cause stands out yet; best so far: {cause} ({score}) — {title}. "
            if verdict == "undecided"
            else "Most likely: {cause} ({score}) — {title}. "
        )
        summary = (
            t(
                headline,
                lang,
                cause=lead.id,
                score=f"{lead.score:.0%}",
                title=title,
            )
            + t("{n} facts observed", lang, n=len(observed))
            + (t(". Settled.", lang) if done else t("; next: {fact}.", lang, fact=nxt))
        )
        return Diagnosis(
            lang=lang,
            version=__version__,
            kb=KBInfo(
                dirs=self.kb.dirs,
                causes=len(self.kb.causes),
                facts=len(self.kb.facts),
                claims=len(self.kb.claims),
            ),
            summary=summary,
            done=done,
            verdict=verdict,
            causes=causes,
            next_steps=[self._step_out(st, lang) for st in steps[:8]],
            declined=skip,
            verified=verified,  # type: ignore[arg-type]
            next_questions=questions,
            resemblance=[
                ResemblanceOut(
                    cause=r.cause,
                    score=round(r.score, 4),
                    standout=round(r.standout, 3),
                    words=list(r.words),
                )
                for r in resemblance
            ],
            facts=facts,
            claims=claims,
            warnings=[*(warnings or []), *res.warnings],
        )

    # -- pieces ---------------------------------------------------------------------------
    def _settled(
        self,
        post: Posterior,
        lead: int,
        observed: Mapping[str, str],
        verified: Mapping[str, str],
        resemblance: Sequence[Resemblance],
    ) -> bool:
        """The lead reaches SETTLED, and would without the description's wording: words are a
        hint, so what settles a cause is what was observed."""
        if post.probs[lead] < SETTLED:
            return False
        if not any(log_lr(r) > 0 for r in resemblance):
            return True
        bare = posterior(self.model, dict(observed), self.extra_terms(verified, ()))
        return bool(bare.probs[lead] >= SETTLED)

    def _verdict(
        self,
        post: Posterior,
        lead: int,
        observed: Mapping[str, str],
        winners: Mapping[str, Observation] | None = None,
    ) -> str:
        if post.causes[lead] != CATCH_ALL:
            return "cause" if post.probs[lead] >= STANDS_OUT else "undecided"
        if not observed:  # with nothing observed, nothing looks healthy or otherwise yet
            return "undecided"
        # against a job with no fault at all: the catch-all's own row also holds faults the
        # KB does not know, which show symptoms too
        table_of = self.model.facts
        for fid, cls in observed.items():
            table = table_of.get(fid)
            fact = self.kb.facts.get(fid)
            if table is None or fact is None or not fact.no_fault:
                continue
            k = table.index[cls]
            if no_fault_distribution(fact, table.classes)[k] < 0.5 * table.healthy[k]:
                # a symptom no healthy job shows: "nothing fits" once the catalogued causes
                # have been weighed and the catch-all stands out, not on the symptom alone
                return "nothing-fits" if post.probs[lead] >= STANDS_OUT else "undecided"
        # "looks healthy" is a finding about the job: it needs something seen of the job itself
        # (a scan, a probe, a trace), not only what a person said of it; a person who reports a
        # plateau or a noisy curve and nothing else has reported a symptom, not health
        if winners is not None and not any(
            o.source in MEASURED_OR_SCANNED for o in winners.values()
        ):
            return "undecided"
        return "looks-healthy"

    def _cause_out(
        self,
        post: Posterior,
        i: int,
        rank: int,
        winners: dict[str, Observation],
        verdict: str = "cause",
        lang: Lang = "en",
        described: Mapping[str, Resemblance] | None = None,
    ) -> CauseOut:
        cid = post.causes[i]
        evidence = []
        for c in sorted(post.contributions.get(i, []), key=lambda c: -abs(c.log_lr)):
            if abs(c.log_lr) < 1e-9:
                continue
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
                        size=round(c.log_lr / math.log(10), 4),
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
                        direction="for" if c.log_lr > 0 else "against",
                        size=round(c.log_lr / math.log(10), 4),
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
                    direction="for" if c.log_lr > 0 else "against",
                    size=round(c.log_lr / math.log(10), 4),
                    path=path,
                )
            )
        if cid == CATCH_ALL:
            title = {
                "nothing-fits": CATCH_ALL_NOTHING_FITS,
                "looks-healthy": CATCH_ALL_HEALTHY,
            }.get(verdict, CATCH_ALL_TITLE)
            title = t(title, lang)
            return CauseOut(
                id=CATCH_ALL,
                title=title,
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
        cause = self.kb.causes[cid]
        fixes = []
        for fid in cause.fixes:
            fix = self.kb.fixes[fid]
            fixes.append(
                FixOut(
                    id=fix.id,
                    title=text(fix, "title", lang),
                    steps=text(fix, "steps", lang),
                    code=CodeOut(before=fix.code.before, after=fix.code.after)
                    if fix.code
                    else None,
                    verify=VerifyOut(command=fix.verify.command, expect=text(fix, "expect", lang)),
                    cost=fix.cost,
                )
            )
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
            fixes=fixes,
            references=[r.url for r in cause.references],
        )

    def _fact_out(self, obs: Observation, losers: list[Observation], lang: Lang = "en") -> FactOut:
        fact = self.kb.facts.get(obs.fact)
        return FactOut(
            fact=obs.fact,
            value=obs.value,
            source=obs.source,
            where=obs.where,
            detail=obs.detail,
            question=text(fact, "question", lang) if fact else obs.fact,
            superseded=[
                SupersededValue(value=o.value, source=o.source, where=o.where) for o in losers
            ],
        )

    def claims(self, post: Posterior, observed: set[str], lang: Lang = "en") -> list[ClaimOut]:
        """Forum advice that the evidence bears on: myths refuted, real causes confirmed or
        ruled out by what was observed."""
        # Only a rank below CLAIM_RANKS decides anything: rank the leaders, not every cause.
        leaders = post.ranking()[:CLAIM_RANKS]
        rank_of = {post.causes[i]: r for r, i in enumerate(leaders)}
        priors = self.model.priors
        total_prior = sum(priors)

        def prior_share(cause: str) -> float:
            return priors[self.cause_index[cause]] / total_prior

        out: list[tuple[int, ClaimOut]] = []
        for claim in self.kb.claims.values():
            causes = [c for c in (self.kb.resolve_cause(x) for x in claim.causes) if c]
            in_play_facts = [f for f in claim.facts if f in observed]
            top_causes = [c for c in causes if rank_of.get(c, CLAIM_RANKS) < CLAIM_RANKS]
            if claim.verdict in ("myth", "harmful"):
                # Show a refuted tip whenever the user's situation touches it: one of its facts
                # or one of its causes' facts was observed, or its cause is in contention.
                touched = sorted({f for c in causes for f in self.linked_facts(c) if f in observed})
                if not (in_play_facts or top_causes or touched):
                    continue
                seen = in_play_facts or touched
                why = t("Refuted by how PyTorch works (see reason)", lang) + (
                    t("; your situation: {facts}", lang, facts=", ".join(seen[:4])) if seen else ""
                )
                order = 0 if claim.verdict == "harmful" else 1
                out.append((order, self._claim_out(claim, "refuted", why, causes, lang)))
                continue
            if not causes:
                continue
            best = max(causes, key=post.prob)
            if rank_of.get(best, CLAIM_RANKS) < 3 and post.prob(best) >= 0.1:
                why = t(
                    "{cause} ranks #{rank} at {score} on this evidence",
                    lang,
                    cause=best,
                    rank=rank_of[best] + 1,
                    score=f"{post.prob(best):.0%}",
                )
                out.append((2, self._claim_out(claim, "confirmed", why, causes, lang)))
            elif observed and all(post.prob(c) < prior_share(c) / 5 for c in causes):
                why = t(
                    "Sound advice in general, but the evidence here rules out {causes}",
                    lang,
                    causes=", ".join(causes),
                )
                out.append((3, self._claim_out(claim, "ruled-out", why, causes, lang)))
        out.sort(key=lambda t: (t[0], t[1].provenance[0], t[1].id))
        return [c for _, c in out]

    @staticmethod
    def _claim_out(claim, stance: str, why: str, causes: list[str], lang: Lang = "en") -> ClaimOut:  # type: ignore[no-untyped-def]
        return ClaimOut(
            id=claim.id,
            text=text(claim, "text", lang),
            provenance=claim.provenance,
            verdict=claim.verdict,
            stance=stance,  # type: ignore[arg-type]
            reason=text(claim, "reason", lang).strip(),
            why_here=why,
            causes=causes,
            references=[r.url for r in claim.references],
            experiment=claim.experiment,
        )


def _how(sources: Sequence[str]) -> str:
    if "asked" in sources:
        return "ask"
    if "probe" in sources:
        return "probe"
    if "trace" in sources:
        return "trace"
    return "script"


def _choices(fact) -> list[str] | None:  # type: ignore[no-untyped-def]
    if fact.type == "bool":
        return ["true", "false"]
    if fact.type == "enum":
        return list(fact.values)
    return None
