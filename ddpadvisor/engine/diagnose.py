"""From observations to numbers: resolve conflicts, rank the causes, pick the next steps.

The engine returns ids, probabilities, log-likelihood ratios, paths and steps
(:class:`Inference`); it holds no text for people and imports no language. The presenter
(:mod:`ddpadvisor.report.present`) turns an inference into a :class:`Diagnosis` in a language.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ddpadvisor.engine.infer import Contribution, Posterior, posterior
from ddpadvisor.engine.model import CATCH_ALL, CompiledModel, load_model, no_fault_distribution
from ddpadvisor.engine.questions import Step, next_steps
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.resemblance import Resemblance, log_lr
from ddpadvisor.kb.values import ValueProblem, classify, condition_holds, parse_value
from ddpadvisor.observation import PRECEDENCE, Observation

if TYPE_CHECKING:
    from ddpadvisor.kb.schema import Fact

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


@dataclass(frozen=True)
class Conflict:
    """Two observations of one fact that disagree: the winner's value is the one used."""

    fact: str
    winner: Observation
    loser: Observation


@dataclass
class Resolved:
    winners: dict[str, Observation]
    superseded: dict[str, list[Observation]]
    conflicts: list[Conflict]


def resolve(observations: Iterable[Observation]) -> Resolved:
    """Measured beats scanned beats asked; within a level the later observation wins."""
    winners: dict[str, Observation] = {}
    superseded: dict[str, list[Observation]] = {}
    conflicts: list[Conflict] = []
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
                conflicts.append(Conflict(fact, win, lose))
    return Resolved(winners, superseded, conflicts)


def _show(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def derive(fact: Fact, kb: KnowledgeBase, known: Mapping[str, Observation]) -> Observation | None:
    """The value of a ``derived_from`` fact on the known observations: false as soon as one
    condition is known not to hold, true once all hold, None while any is unknown. It counts
    as seen by the least trusted source among the observations that decide it."""
    decided: list[Observation] = []
    for cond in fact.derived_from:
        obs = known.get(cond.fact)
        spec = kb.facts.get(cond.fact)
        if obs is None or spec is None:
            continue
        if not condition_holds(spec, cond, obs.value):
            return _derived(fact, False, [obs])
        decided.append(obs)
    if len(decided) < len(fact.derived_from):
        return None
    return _derived(fact, True, decided)


def _derived(fact: Fact, value: bool, parts: list[Observation]) -> Observation:
    weakest = min(parts, key=lambda o: PRECEDENCE[o.source])
    said = " and ".join(f"{o.fact} = {_show(o.value)}" for o in parts)
    return Observation(
        fact=fact.id, value=value, source=weakest.source, where=weakest.where, detail=f"from {said}"
    )


CLAIM_RANKS = 5  # a claim's cause counts as in contention among this many leaders


@dataclass(frozen=True)
class ClaimStance:
    """What the evidence says of one piece of forum advice: ``refuted`` (a myth or harmful tip
    the situation touches; ``seen``: the observed facts that touch it), ``confirmed`` (its best
    cause ``cause`` ranks ``rank`` (1-based) at ``score``) or ``ruled-out``."""

    claim: str
    stance: str
    order: int  # refuted harmful 0, refuted myth 1, confirmed 2, ruled out 3
    causes: tuple[str, ...]
    seen: tuple[str, ...] = ()
    cause: str | None = None
    rank: int | None = None
    score: float | None = None


@dataclass
class Inference:
    """Everything a diagnosis says, as numbers and ids: what was observed and which value won,
    the posterior and its ranking, the verdict, the next steps, the advice the evidence bears on."""

    resolved: Resolved
    winners: dict[str, Observation]  # the resolved observations plus what their answers imply
    observed: dict[str, str]  # fact id -> class
    posterior: Posterior
    ranking: list[int]
    verdict: str  # cause | undecided | nothing-fits | looks-healthy
    steps: list[Step]
    declined: list[str]
    done: bool
    claims: list[ClaimStance]
    verified: dict[str, str]
    resemblance: list[Resemblance]


class Engine:
    """Facts, causes and the graph; nothing about files, torch or terminals."""

    def __init__(self, kb: KnowledgeBase, model: CompiledModel | None = None):
        self.kb = kb
        self.model = model or load_model(kb)
        # named causes (modes merged), as the posterior ranks them
        self.cause_index = {c: i for i, c in enumerate(self.model.public_causes)}
        self._linked: dict[str, set[str]] = {}

    def linked_facts(self, cause: str) -> set[str]:
        """Facts the cause is linked to (directly or through a mechanism), found when first
        asked: a claim names a few causes of what may be thousands."""
        got = self._linked.get(cause)
        if got is None:
            pi = self.cause_index.get(cause)
            members = self.model.members[pi] if pi is not None else []
            got = {
                fid
                for fid, t in self.model.facts.items()
                if any(ci in t.likelihood for ci in members)
            }
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
            pi = self.cause_index.get(r.cause)
            lr = log_lr(r)
            if pi is not None and lr > 0:
                for ci in self.model.members[pi]:
                    out.setdefault(ci, []).append(Contribution(DESCRIPTION, "resembles", lr, ()))
        return out

    def with_implied(self, winners: dict[str, Observation]) -> dict[str, Observation]:
        """Winners plus the facts their answers settle (``implies``) and the facts derived
        from them (``derived_from``), where nothing else did."""
        out = self._implied(winners)
        for fact in self.derived:
            if fact.id not in out and (obs := derive(fact, self.kb, out)) is not None:
                out[fact.id] = obs
        return out

    @cached_property
    def derived(self) -> list[Fact]:
        return [f for f in self.kb.facts.values() if f.derived_from]

    def _implied(self, winners: dict[str, Observation]) -> dict[str, Observation]:
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
            for pi, cid in enumerate(self.model.public_causes):
                cause = self.kb.causes.get(cid)
                if cause is not None and fix_id in cause.fixes:
                    for ci in self.model.members[pi]:
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
            post.compiled(),
            winners,
            declined=declined,
            gpu_available=gpu_available,
            consulted=consulted,
        )

    def infer(
        self,
        observations: Iterable[Observation],
        *,
        gpu_available: bool | None = None,
        declined: Iterable[str] = (),
        verified: Mapping[str, str] | None = None,
        resemblance: Sequence[Resemblance] = (),
        run_failed: bool = False,
    ) -> Inference:
        """Rank the causes on the observations and choose what to do next: numbers only."""
        res = resolve(observations)
        winners = self.with_implied(res.winners)
        observed = self.observed_classes(winners)
        verified = {k: v for k, v in (verified or {}).items() if v in VERIFY_LR}
        resemblance = [r for r in resemblance if r.cause in self.cause_index]
        post = posterior(self.model, observed, self.extra_terms(verified, resemblance))
        ranking = post.ranking()
        verdict = self._verdict(post, ranking[0], observed, winners)
        if run_failed and verdict == "looks-healthy":
            verdict = "undecided"  # a run that failed (or took no step) never looks healthy
        skip = sorted(set(declined) - set(winners))
        consulted = {o.source for losers in res.superseded.values() for o in losers}
        steps = self.steps(
            post, winners, declined=skip, gpu_available=gpu_available, consulted=consulted
        )
        done = self._settled(post, ranking[0], observed, verified, resemblance) or (
            not steps or steps[0].gain < MIN_GAIN
        )
        return Inference(
            resolved=res,
            winners=winners,
            observed=observed,
            posterior=post,
            ranking=ranking,
            verdict=verdict,
            steps=steps,
            declined=skip,
            done=done,
            claims=self.claims(post, set(observed)),
            verified=verified,
            resemblance=resemblance,
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

    def claims(self, post: Posterior, observed: set[str]) -> list[ClaimStance]:
        """Forum advice that the evidence bears on: myths refuted, real causes confirmed or
        ruled out by what was observed; refuted harmful tips first, then myths, confirmed,
        ruled out, each by provenance."""
        # Only a rank below CLAIM_RANKS decides anything: rank the leaders, not every cause.
        leaders = post.ranking()[:CLAIM_RANKS]
        rank_of = {post.causes[i]: r for r, i in enumerate(leaders)}
        priors = self.model.public_priors
        total_prior = sum(priors)

        def prior_share(cause: str) -> float:
            return priors[self.cause_index[cause]] / total_prior

        out: list[tuple[ClaimStance, tuple[str, str]]] = []
        for claim in self.kb.claims.values():
            causes = tuple(c for c in (self.kb.resolve_cause(x) for x in claim.causes) if c)
            in_play_facts = [f for f in claim.facts if f in observed]
            top_causes = [c for c in causes if rank_of.get(c, CLAIM_RANKS) < CLAIM_RANKS]
            key = (claim.provenance[0], claim.id)
            if claim.verdict in ("myth", "harmful"):
                # Show a refuted tip whenever the user's situation touches it: one of its facts
                # or one of its causes' facts was observed, or its cause is in contention.
                touched = sorted({f for c in causes for f in self.linked_facts(c) if f in observed})
                if not (in_play_facts or top_causes or touched):
                    continue
                seen = tuple(in_play_facts or touched)
                order = 0 if claim.verdict == "harmful" else 1
                out.append((ClaimStance(claim.id, "refuted", order, causes, seen), key))
                continue
            if not causes:
                continue
            best = max(causes, key=post.prob)
            if rank_of.get(best, CLAIM_RANKS) < 3 and post.prob(best) >= 0.1:
                stance = ClaimStance(
                    claim.id,
                    "confirmed",
                    2,
                    causes,
                    cause=best,
                    rank=rank_of[best] + 1,
                    score=post.prob(best),
                )
                out.append((stance, key))
            elif observed and all(post.prob(c) < prior_share(c) / 5 for c in causes):
                out.append((ClaimStance(claim.id, "ruled-out", 3, causes), key))
        out.sort(key=lambda sk: (sk[0].order, *sk[1]))
        return [s for s, _ in out]
