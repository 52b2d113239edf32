"""From observations to a :class:`Diagnosis`: resolve conflicts, rank, explain, ask next."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ddpadvisor import __version__
from ddpadvisor.engine.infer import Posterior, expected_gain, posterior
from ddpadvisor.engine.model import CATCH_ALL, CompiledModel, load_model
from ddpadvisor.i18n import Lang, t, text, value_label
from ddpadvisor.kb import levels
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import classify
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
    QuestionOut,
    SupersededValue,
    VerifyOut,
)

CATCH_ALL_TITLE = "No catalogued fault (healthy job, or a cause the KB does not know)"
CATCH_ALL_MECHANISM = (
    "Nothing observed so far points at a catalogued cause more than a healthy DDP job would. "
    "Either the job is fine (early noise, a normal fine-tuning curve) or the fault is not in the "
    "knowledge base yet: gather more evidence (a trace of the real job is the strongest)."
)
SETTLED = 0.85  # stop asking once the top cause has this posterior
MIN_GAIN = 0.02  # bits; below this a question is not worth asking


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


# A rule folder of thousands of causes would otherwise put every one in the output.
LIST_AT_MOST = 50


class Engine:
    """Facts, causes and the graph; nothing about files, torch or terminals."""

    def __init__(self, kb: KnowledgeBase, model: CompiledModel | None = None):
        self.kb = kb
        self.model = model or load_model(kb)
        self.cause_index = {c: i for i, c in enumerate(self.model.causes)}
        # Facts each cause is linked to (directly or through a mechanism).
        self.cause_facts: dict[str, set[str]] = {}
        for fid, table in self.model.facts.items():
            for ci in table.likelihood:
                self.cause_facts.setdefault(self.model.causes[ci], set()).add(fid)

    # -- core -----------------------------------------------------------------------------
    def observed_classes(self, winners: dict[str, Observation]) -> dict[str, str]:
        return {
            f: classify(self.kb.facts[f], o.value) for f, o in winners.items() if f in self.kb.facts
        }

    def posterior(self, observations: Iterable[Observation]) -> Posterior:
        return posterior(self.model, self.observed_classes(resolve(observations).winners))

    def questions(
        self,
        post: Posterior,
        observed: set[str],
        *,
        gpu_available: bool | None = None,
        allow: tuple[str, ...] = ("ask", "probe"),
        limit: int | None = 5,
        lang: Lang = "en",
    ) -> list[QuestionOut]:
        out = []
        for fact in self.kb.facts.values():
            if fact.id in observed:
                continue
            how = _how(fact.sources)
            if how not in allow:
                continue
            if fact.needs_gpu and gpu_available is False:
                continue  # infinite cost: nothing to measure it on
            gain = expected_gain(self.model, post, fact.id)
            if gain <= 0:
                continue
            out.append(
                QuestionOut(
                    fact=fact.id,
                    question=text(fact, "question", lang),
                    type=fact.type,
                    choices=_choices(fact),
                    help=text(fact, "help", lang),
                    how=how,  # type: ignore[arg-type]
                    probe=fact.probe if how == "probe" else None,
                    expected_gain=round(gain, 6),
                    cost=fact.cost,
                    gain_per_cost=round(gain / fact.cost, 6),
                )
            )
        out.sort(key=lambda q: (-q.gain_per_cost, q.fact))
        return out if limit is None else out[:limit]

    def diagnose(
        self,
        observations: list[Observation],
        *,
        warnings: list[str] | None = None,
        gpu_available: bool | None = None,
        top: int | None = None,
        lang: Lang = "en",
    ) -> Diagnosis:
        res = resolve(observations, lang)
        observed = self.observed_classes(res.winners)
        post = posterior(self.model, observed)
        ranking = post.ranking()
        shown = ranking[:top] if top else ranking
        if top is None and len(ranking) > LIST_AT_MOST:
            shown = ranking[:LIST_AT_MOST]
            res.warnings.append(
                f"listing the {LIST_AT_MOST} most likely of {len(ranking)} causes "
                "(--top N for another number, --top 0 for all)"
            )
        causes = [
            self._cause_out(post, i, rank + 1, res.winners, lang) for rank, i in enumerate(shown)
        ]
        questions = self.questions(post, set(observed), gpu_available=gpu_available, lang=lang)
        best = post.probs[ranking[0]]
        done = best >= SETTLED or not questions or questions[0].expected_gain < MIN_GAIN
        facts = [
            self._fact_out(o, res.superseded.get(f, []), lang)
            for f, o in sorted(res.winners.items())
        ]
        claims = self.claims(post, set(observed), lang)
        lead = causes[0]
        title = lead.title.rstrip("。.")
        summary = (
            t(
                "Most likely: {cause} ({score}) — {title}. ",
                lang,
                cause=lead.id,
                score=f"{lead.score:.0%}",
                title=title,
            )
            + t("{n} facts observed", lang, n=len(observed))
            + (
                t(". Settled.", lang)
                if done
                else t("; next: {fact}.", lang, fact=questions[0].fact)
            )
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
            causes=causes,
            next_questions=questions,
            facts=facts,
            claims=claims,
            warnings=[*(warnings or []), *res.warnings],
        )

    # -- pieces ---------------------------------------------------------------------------
    def _cause_out(
        self,
        post: Posterior,
        i: int,
        rank: int,
        winners: dict[str, Observation],
        lang: Lang = "en",
    ) -> CauseOut:
        cid = post.causes[i]
        evidence = []
        for c in sorted(post.contributions.get(i, []), key=lambda c: -abs(c.log_lr)):
            if abs(c.log_lr) < 1e-9:
                continue
            obs = winners[c.fact]
            strongest = max(c.paths, key=lambda p: p.weight)
            evidence.append(
                EvidenceItem(
                    fact=c.fact,
                    value=obs.value,
                    source=obs.source,
                    where=obs.where,
                    detail=obs.detail,
                    direction="for" if c.log_lr > 0 else "against",
                    size=round(c.log_lr / math.log(10), 4),
                    path=strongest.nodes(cid),
                )
            )
        if cid == CATCH_ALL:
            return CauseOut(
                id=CATCH_ALL,
                title=t(CATCH_ALL_TITLE, lang),
                area="none",
                rank=rank,
                score=post.probs[i],
                prior=levels.CATCH_ALL_PRIOR,
                catch_all=True,
                mechanism=t(CATCH_ALL_MECHANISM, lang),
                evidence=[],
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
        ranking = post.ranking()
        rank_of = {post.causes[i]: r for r, i in enumerate(ranking)}
        prior_share = {c: p for c, p in zip(post.causes, _normalised(self.model.priors))}
        out: list[tuple[int, ClaimOut]] = []
        for claim in self.kb.claims.values():
            causes = [c for c in (self.kb.resolve_cause(x) for x in claim.causes) if c]
            in_play_facts = [f for f in claim.facts if f in observed]
            top_causes = [c for c in causes if rank_of.get(c, 99) < 5]
            if claim.verdict in ("myth", "harmful"):
                # Show a refuted tip whenever the user's situation touches it: one of its facts
                # or one of its causes' facts was observed, or its cause is in contention.
                touched = sorted(
                    {f for c in causes for f in self.cause_facts.get(c, ()) if f in observed}
                )
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
            if rank_of[best] < 3 and post.prob(best) >= 0.1:
                why = t(
                    "{cause} ranks #{rank} at {score} on this evidence",
                    lang,
                    cause=best,
                    rank=rank_of[best] + 1,
                    score=f"{post.prob(best):.0%}",
                )
                out.append((2, self._claim_out(claim, "confirmed", why, causes, lang)))
            elif observed and all(post.prob(c) < prior_share[c] / 5 for c in causes):
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


def _normalised(xs: list[float]) -> list[float]:
    total = sum(xs)
    return [x / total for x in xs]


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
