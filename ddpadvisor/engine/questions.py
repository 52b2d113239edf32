"""Next steps: which question to ask, or which probe, trace or scan to run, next.

Every candidate step is scored by decision-theoretic value: the expected entropy reduction of
the cause posterior (bits) if the step settles its facts, times the chance that this user can
carry it out (answer other than "don't know", run the probe ...), divided by its cost.

- An *ask* settles one fact a person can answer; it is offered only when its preconditions
  (``ask_if``) hold on answers already given, and never again once declined.
- A *probe* settles every fact its probe measures; a *trace* and a *scan* settle every fact
  they can establish. Their gain is the joint gain of the facts they settle (the most
  informative few, enumerated exactly under the single-fault model).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ddpadvisor.engine.infer import Posterior
from ddpadvisor.engine.model import CompiledModel
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.schema import Fact
from ddpadvisor.kb.values import condition_holds, option_labels, option_values
from ddpadvisor.observation import NEEDS, Observation

# Cost and the chance it can be carried out, per kind of measured step. A probe needs torchrun
# on the machine; a trace needs the training script and a short run of it; a scan needs the
# script file only.
# attach: a file the user already has (the run's log or trainer_state.json, its DeepSpeed or
# accelerate config, its launch command, pip list / collect_env); nearly everyone has one.
STEP_COST = {"probe": 3.0, "trace": 5.0, "scan": 2.0, "attach": 1.0}
STEP_CHANCE = {"probe": 0.7, "trace": 0.6, "scan": 0.8, "attach": 0.8}
GPU_UNKNOWN_CHANCE = 0.5  # a GPU-only probe where nobody said whether a GPU is at hand
JOINT_FACTS = 3  # a measured step's gain is enumerated over its this-many best facts
# How much one answer or one "don't know" tells about this user: their chance of answering the
# next question is the fact's own chance times (answered + PRIOR) / (answered + declined + PRIOR),
# so after a run of "don't know" a probe, trace or scan (which needs no knowledge) comes forward.
USER_PRIOR = 2.0
STEP_IDS = ("trace", "scan", "attach")  # plus "probe:NAME" and "ask:FACT"
# What a measured step needs beyond the user's time: the training script (scan, trace) or a
# machine to launch on (probe, trace). A declined step is evidence that the user lacks what it
# needs, a step carried out that they have it; the chance of every other step needing the same
# thing is scaled by (carried out + ACCESS_PRIOR) / (carried out + declined + ACCESS_PRIOR), so
# a user who cannot share their script is not offered the trace next, and one who cannot run
# probes is not walked through each of them in turn.
STEP_NEEDS: dict[str, tuple[str, ...]] = {
    "probe": ("machine",),
    "scan": ("script",),
    "trace": ("script", "machine"),
    "attach": (),
}
ACCESS_PRIOR = 1.0
assert {n for needs in STEP_NEEDS.values() for n in needs} == set(NEEDS)


def lacking(declined: Iterable[str]) -> set[str]:
    """What the user said they do not have (``without:script``, ``without:machine``)."""
    return {d.split(":", 1)[1] for d in declined if d.startswith("without:")}


def decline_hints(step_id: str, kind: str) -> list[str]:
    """The answers that decline a step: the step alone, or everything that needs what it
    needs (``--without``), as a user types them."""
    if kind == "ask":
        return [f"--set {step_id.removeprefix('ask:')}=unknown"]
    return [f"--set {step_id}=unknown", *(f"--without {n}" for n in STEP_NEEDS.get(kind, ()))]


COMMANDS = {
    "attach": "ddpadvisor --json --attach trainer_state.json  (or your training log, DeepSpeed/accelerate config, launch command, pip list)",
    # the trace goes to ddpadvisor-trace, or to ddpadvisor-trace-2, -3, … when that one holds
    # an earlier trace; the command prints the folder it used
    "trace": "ddpadvisor trace --nproc 2 -- train.py [args]  then  ddpadvisor --json --trace "
    "ddpadvisor-trace (or the -2, -3, … folder it prints)",
    "scan": "ddpadvisor --json --script train.py",
}


def default_chance(fact: Fact) -> float:
    """How likely a person knows the answer offhand, from how much effort it takes."""
    if fact.answerable is not None:
        return fact.answerable
    if fact.cost <= 1:
        return 0.85
    if fact.cost <= 1.5:
        return 0.75
    if fact.cost <= 2:
        return 0.6
    return 0.4


@dataclass
class Step:
    id: str
    kind: str  # ask | probe | trace | scan
    facts: list[str]
    gain: float
    chance: float
    cost: float
    probe: str | None = None
    gains: dict[str, float] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return self.gain * self.chance / self.cost


def joint_gain(model: CompiledModel, post: Posterior, facts: list[str]) -> float:
    """Expected entropy reduction (bits) from observing all of ``facts`` together.

    Causes linked to none of the facts predict the healthy distribution for every outcome,
    like the catch-all, so their share is summed in closed form; so is each group of linked
    causes that predict the same likelihood rows for all of the facts (a rule folder written
    with a few strength levels has thousands of causes but few distinct rows). A group of
    causes with mass M, sum of p log p S and outcome likelihood l adds l * (S + M log(l / pk))
    to the outcome's sum of q log(q / pk). The cost is O(linked causes + groups x outcomes),
    which keeps a 10,000-cause rule folder's next steps cheap.
    """
    ids = [f for f in facts if f in model.facts]
    if not ids:
        return 0.0
    tables = [model.facts[f] for f in ids]
    groups = _groups(model, post, ids)
    masses = [m for _, m, _ in groups]
    shares = [s for _, _, s in groups]
    h_now = post.entropy()
    m_u = max(0.0, 1.0 - sum(masses))
    # sum of p log p over the unlinked causes: the whole posterior's minus the linked share
    s_u = -h_now - sum(shares)
    after = 0.0
    for combo in itertools.product(*(range(len(t.classes)) for t in tables)):
        healthy = math.prod(t.healthy[k] for t, k in zip(tables, combo))
        ls = [math.prod(r[k] for r, k in zip(rows, combo)) for rows, _, _ in groups]
        pk = sum(m * x for m, x in zip(masses, ls)) + m_u * healthy
        if pk <= 0:
            continue
        for x, m, s in zip(ls, masses, shares):
            if x > 0 and m > 0:
                after += -x * (s + m * math.log2(x / pk))
        if m_u > 0 and healthy > 0:
            # the unlinked causes: q_u = p_u * healthy for each of them
            after += -healthy * (s_u + m_u * math.log2(healthy / pk))
    return max(0.0, h_now - after)


def _groups(
    model: CompiledModel, post: Posterior, ids: list[str]
) -> list[tuple[list[list[float]], float, float]]:
    """The causes linked to any of the facts ``ids``, grouped by their likelihood rows for all
    of them (the healthy row where a cause is not linked): (rows per fact, the group's
    posterior mass, its sum of p log2 p), each summed in ascending cause order."""
    probs = post.probs
    plogp = post.plogp()
    per_fact = [model.row_groups(f) for f in ids]
    if len(per_fact) == 1:
        g = per_fact[0]
        return [
            ([row], sum(map(probs.__getitem__, members)), sum(map(plogp.__getitem__, members)))
            for row, members in zip(g.rows, g.members)
        ]
    union = sorted(set().union(*(g.of for g in per_fact)))
    keys = zip(*(map(g.of.get, union, itertools.repeat(-1)) for g in per_fact))
    mass: dict[tuple[int, ...], float] = {}
    share: dict[tuple[int, ...], float] = {}
    for i, key in zip(union, keys):
        mass[key] = mass.get(key, 0) + probs[i]
        share[key] = share.get(key, 0) + plogp[i]
    healthy = [model.facts[f].healthy for f in ids]
    return [
        ([g.rows[r] if r >= 0 else h for g, r, h in zip(per_fact, key, healthy)], m, share[key])
        for key, m in mass.items()
    ]


def askable(
    fact: Fact, kb: KnowledgeBase, winners: Mapping[str, Observation], declined: set[str]
) -> bool:
    """A question a person may be asked now: not known, not declined, preconditions met."""
    if "asked" not in fact.sources or fact.id in winners or fact.id in declined:
        return False
    if f"ask:{fact.id}" in declined:
        return False
    if any(f in winners for f in fact.settled_by):
        return False
    for cond in fact.ask_if:
        obs = winners.get(cond.fact)
        spec = kb.facts.get(cond.fact)
        if obs is None or spec is None or not condition_holds(spec, cond, obs.value):
            return False
    return not skipped(fact, kb, winners)


def skipped(fact: Fact, kb: KnowledgeBase, winners: Mapping[str, Observation]) -> bool:
    """A fact that does not fit this job (``skip_if`` holds on a known fact): never asked, and
    not counted among what a probe or trace would settle."""
    for cond in fact.skip_if:
        obs = winners.get(cond.fact)
        spec = kb.facts.get(cond.fact)
        if obs is not None and spec is not None and condition_holds(spec, cond, obs.value):
            return True
    return False


def user_factor(kb: KnowledgeBase, winners: Mapping[str, Observation], declined: set[str]) -> float:
    """This user's record so far: answers given against questions declined ("don't know")."""
    answered = sum(1 for o in winners.values() if o.source == "answer")
    asked = {
        d.removeprefix("ask:")
        for d in declined
        if not d.startswith(("probe:", "trace", "scan", "attach", "without:"))
    }
    refused = sum(1 for f in asked if f in kb.facts and "asked" in kb.facts[f].sources)
    return (answered + USER_PRIOR) / (answered + refused + USER_PRIOR)


def access_factor(kind: str, carried_out: set[str], declined: set[str]) -> float:
    """How likely this user can carry out a step of ``kind``, from the steps they took or
    declined (``carried_out``: kinds with observations; ``declined``: step ids)."""
    kinds_declined = [d.split(":", 1)[0] for d in declined if d.startswith(("probe:", *STEP_IDS))]
    if lacking(declined).intersection(STEP_NEEDS.get(kind, ())):
        return 0.0
    factor = 1.0
    for need in STEP_NEEDS.get(kind, ()):
        done = sum(1 for k in carried_out if need in STEP_NEEDS.get(k, ()))
        refused = sum(1 for k in kinds_declined if need in STEP_NEEDS.get(k, ()))
        factor *= (done + ACCESS_PRIOR) / (done + refused + ACCESS_PRIOR)
    return factor


def next_steps(
    kb: KnowledgeBase,
    model: CompiledModel,
    post: Posterior,
    winners: Mapping[str, Observation],
    *,
    declined: Iterable[str] = (),
    gpu_available: bool | None = None,
    consulted: Iterable[str] = (),
) -> list[Step]:
    """Every step worth taking, best first (score, then id). ``consulted``: the sources that
    gave any observation, the ones a stronger source superseded included (a script scanned
    once is not offered again because the trace measured everything it found)."""
    skip = set(declined)
    single: dict[str, float] = {}

    def gain_of(fid: str) -> float:
        if fid not in single:
            single[fid] = joint_gain(model, post, [fid])
        return single[fid]

    def ask_gain(fact: Fact) -> float:
        """A question's own gain, or what the facts its answer settles (``implies``) would
        give, scaled by the share of its answers that settle something."""
        own = gain_of(fact.id)
        targets = sorted({t for imp in fact.implies for t in imp.then if t not in winners})
        if not targets:
            return own
        coverage = min(1.0, len(fact.implies) / max(1, len(model.facts[fact.id].classes)))
        return max(own, coverage * joint_gain(model, post, targets[:JOINT_FACTS]))

    steps: list[Step] = []
    user = user_factor(kb, winners, skip)
    for fact in kb.facts.values():
        if askable(fact, kb, winners, skip):
            g = ask_gain(fact)
            if g > 0:
                chance = default_chance(fact) * user
                steps.append(Step(f"ask:{fact.id}", "ask", [fact.id], g, chance, fact.cost))

    seen_sources = {o.source for o in winners.values()} | set(consulted)
    carried_out = {
        k
        for k, src in (
            ("probe", "probe"),
            ("trace", "trace"),
            ("scan", "script"),
            ("attach", "log"),
        )
        if src in seen_sources
    }
    groups: dict[str, list[str]] = {}
    for fact in kb.facts.values():
        if fact.id in winners or fact.id in skip or skipped(fact, kb, winners):
            continue
        if "probe" in fact.sources and fact.probe:
            groups.setdefault(f"probe:{fact.probe}", []).append(fact.id)
        if "trace" in fact.sources and "trace" not in seen_sources:
            groups.setdefault("trace", []).append(fact.id)
        if "script" in fact.sources and "script" not in seen_sources:
            groups.setdefault("scan", []).append(fact.id)
        if "log" in fact.sources and "log" not in seen_sources:
            groups.setdefault("attach", []).append(fact.id)
    lacks = lacking(skip)
    for step_id, facts in groups.items():
        kind = step_id.split(":", 1)[0]
        if step_id in skip or lacks.intersection(STEP_NEEDS[kind]):
            continue
        chance = STEP_CHANCE[kind] * access_factor(kind, carried_out, skip)
        probe = step_id.split(":", 1)[1] if kind == "probe" else None
        if probe is not None:
            gpu_facts = [f for f in facts if kb.facts[f].needs_gpu]
            if gpu_available is False:
                facts = [f for f in facts if f not in gpu_facts]
            elif gpu_facts and gpu_available is None and len(gpu_facts) == len(facts):
                chance = min(chance, GPU_UNKNOWN_CHANCE)
        gains = {f: gain_of(f) for f in facts}
        best = sorted((f for f in facts if gains[f] > 0), key=lambda f: (-gains[f], f))
        if not best:
            continue
        g = joint_gain(model, post, best[:JOINT_FACTS])
        steps.append(
            Step(
                step_id, kind, best, g, chance, STEP_COST[kind], probe, {f: gains[f] for f in best}
            )
        )
    steps.sort(key=lambda s: (-s.score, s.id))
    return steps


def choice_labels(fact: Fact, lang: str = "en") -> dict[str, str]:
    """Label of every option (English when a language lacks one)."""
    values = option_values(fact) or []
    en = option_labels(fact, "en")
    local = option_labels(fact, lang) if lang != "en" else {}
    defaults = {"true": "yes", "false": "no", "unknown": "don't know"}
    if lang == "zh":
        defaults = {"true": "是", "false": "否", "unknown": "不知道"}
    return {v: local.get(v) or en.get(v) or defaults.get(v, v) for v in values}
