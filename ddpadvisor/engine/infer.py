"""Single-fault posterior over causes plus a catch-all, and next-question selection.

log w_i = log prior_i + sum over observed facts j of log P(class_j | cause i) / h(class_j),
normalised over all causes and the catch-all. Facts a cause is not linked to contribute 0.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ddpadvisor.engine.model import CompiledModel, Path


@dataclass(frozen=True)
class Contribution:
    fact: str
    cls: str
    log_lr: float  # natural log of P(class | cause) / P(class | no fault)
    paths: tuple[Path, ...]


@dataclass
class Posterior:
    causes: list[str]
    probs: list[float]
    log_weights: list[float]
    contributions: Mapping[int, list[Contribution]]
    # cause index -> unknown setup facts that held it below the best cause not resting on one
    held: dict[int, list[str]] = field(default_factory=dict)
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _entropy: float | None = field(default=None, repr=False)
    _plogp: list[float] | None = field(default=None, repr=False)
    _ranking: list[int] | None = field(default=None, repr=False)
    # Where causes have modes: the posterior over the compiled entries (one per mode), which
    # the likelihood tables index (next-step gains use it), and each named cause's leading
    # mode (its index in ``inner``), whose evidence ``contributions`` and ``held`` give.
    inner: Posterior | None = None
    leading: dict[int, int] = field(default_factory=dict)

    def compiled(self) -> Posterior:
        """The posterior the likelihood tables index: ``inner`` where causes have modes."""
        return self.inner or self

    def ranking(self) -> list[int]:
        """Cause indices by probability, highest first, ties by name."""
        if self._ranking is None:
            # Two stable sorts with C-level keys: by name, then by probability descending
            # (reverse=True keeps equal items in order), the same as key (-p, name).
            by_name = sorted(range(len(self.causes)), key=self.causes.__getitem__)
            self._ranking = sorted(by_name, key=self.probs.__getitem__, reverse=True)
        return list(self._ranking)

    def index(self, cause: str) -> int:
        if not self._index:
            self._index = {c: i for i, c in enumerate(self.causes)}
        return self._index[cause]

    def prob(self, cause: str) -> float:
        return self.probs[self.index(cause)]

    def entropy(self) -> float:
        if self._entropy is None:
            self._entropy = -sum(p * math.log2(p) for p in self.probs if p > 0)
        return self._entropy

    def plogp(self) -> list[float]:
        """p log2 p of every cause (0 where p is 0), computed once for all next-step gains."""
        if self._plogp is None:
            self._plogp = [p * math.log2(p) if p > 0 else 0.0 for p in self.probs]
        return self._plogp


# A cause that needs a setup fact nobody has given stays at most this fraction of the best cause
# that needs none, so it cannot lead on an assumption (issue 13: "no cause leads on a fact that
# is still unknown"); once the fact is known the cap goes.
HELD_SHARE = 0.8
MEASURED_LEAD = math.log(2.0)  # a measurement at least doubling the odds frees the cause
# An answer that is itself the slip (at least this many times likelier under the cause than in a
# job without it: "unscale_ runs after clipping", "zero_grad inside the accumulation loop") shows
# the cause directly, so it no longer rests on the unknown setup fact. Setup facts that gate
# some cause (precision, loss_pattern, ...) never free one this way.
SPECIFIC_LEAD = math.log(8.0)
# A cause that only the setup raises (fp16, clipping, a GradScaler: ``CompiledModel.setup``) and
# no symptom, slip or measurement does stays below the catch-all at this share of it: "training
# runs in fp16" is no sign that fp16 overflows. A fact backs a cause when it favours the cause
# over the catch-all by more than this (log odds): a fact a healthy job shows nearly as often
# (a burst of loss-scale overflows while the scaler calibrates) backs nothing.
BACKED_LR = math.log(1.5)
# What a fact read from the code (or said of it) shows is a configuration, not a slip, when at
# least this share of jobs with no fault shows it too: variable-length batches, a per-rank mean
# loss, small per-GPU batches, linear lr scaling, a short warmup, rank-0 printing. Such facts
# are a cause's preconditions; they rise and fall together (an LLM fine-tuning script shows all
# of them), so however many agree they do not make the cause lead: like the setup, they leave it
# below the catch-all until a slip rare in healthy jobs, a symptom or a measurement backs it.
COMMON_IN_HEALTHY = 0.25


def _weights(
    model: CompiledModel,
    observed: dict[str, str],
    extra: dict[int, list[Contribution]] | None,
) -> tuple[list[float], dict[int, list[str]]]:
    """Log weights after the evidence and the held-back cap, and the causes held back."""
    logw = list(model.log_priors)
    freed: set[int] = set()  # causes a measurement backs strongly enough to lift the cap
    backed: set[int] = set()  # causes something other than the setup raises
    shown: set[int] = set()  # causes a reported symptom backs
    by_setup: dict[int, float] = {}  # cause -> log odds the setup facts raise it by
    setup = {f for facts, _ in model.gate_groups for f in facts}
    for ci, terms in (extra or {}).items():
        for term in terms:
            logw[ci] += term.log_lr
            if term.log_lr > BACKED_LR:  # a passed verify, or a description reading like it
                backed.add(ci)
    for fact_id in sorted(observed):
        table = model.facts.get(fact_id)
        if table is None:
            continue
        cls = observed[fact_id]
        # An answer far likelier under a cause (a measurement, or a slip 8x likelier) lifts the
        # cap on causes still waiting for a setup fact; setup facts themselves never do.
        lead = MEASURED_LEAD if fact_id in model.measured else SPECIFIC_LEAD
        if fact_id in setup:
            lead = math.inf
        groups = model.log_ratios(fact_id, table.index[cls])
        # what the fact says for the catch-all: a fact backs a cause when it favours the cause
        # over "no fault" ("the loss went NaN" backs every cause that can make NaN)
        base = next((lr for lr, m in groups if model.catch_all in m), 0.0) + BACKED_LR
        describes_setup = fact_id in model.setup or (
            fact_id in model.configuration and table.healthy[table.index[cls]] >= COMMON_IN_HEALTHY
        )
        for lr, members in groups:
            for ci in members:
                logw[ci] += lr
            if lr > lead:
                freed.update(members)
            if describes_setup:
                if lr > 0:
                    for ci in members:
                        by_setup[ci] = by_setup.get(ci, 0.0) + lr
            elif lr > base:
                backed.update(members)
                if fact_id in model.symptoms:
                    shown.update(members)
    unbacked: dict[int, list[str]] = {}
    # a setup that is itself the slip (pure fp16 weights: SPECIFIC_LEAD) backs its cause
    only_setup = {
        ci
        for ci, lr in by_setup.items()
        if ci not in backed and lr <= SPECIFIC_LEAD and ci != model.catch_all
    }
    _hold_unbacked(model, observed, logw, only_setup, unbacked)
    waiting: list[tuple[int, list[str]]] = []
    for facts, members in model.gate_groups:
        missing = [f for f in facts if f not in observed]
        if missing:  # one list shared by the group's causes: read, never changed
            waiting.extend((ci, missing) for ci in members if ci not in freed)
    held: dict[int, list[str]] = {}
    if waiting:
        others = list(logw)
        for ci, _ in waiting:
            others[ci] = -math.inf
        ceiling = max(others) + math.log(HELD_SHARE)
        for ci, missing in waiting:
            if logw[ci] > ceiling:  # below the ceiling anyway: not held back
                logw[ci] = ceiling
                held[ci] = missing
    for ci, facts in unbacked.items():
        held.setdefault(ci, facts)
    _hold_unshown(model, observed, logw, model.display - shown, backed - model.display, held)
    return logw, held


class Explanation(Mapping[int, list[Contribution]]):
    """Each cause's contributions (``extra`` terms first, then the observed facts in id
    order), built when a report first asks for that cause: a diagnosis shows a few causes of
    a rule folder that may link thousands to each observed fact."""

    def __init__(
        self,
        model: CompiledModel,
        observed: dict[str, str],
        extra: dict[int, list[Contribution]] | None,
    ) -> None:
        self._model = model
        self._facts = [
            (fid, observed[fid], table)
            for fid in sorted(observed)
            if (table := model.facts.get(fid)) is not None
        ]
        self._extra = extra or {}
        self._done: dict[int, list[Contribution]] = {}

    def __getitem__(self, ci: int) -> list[Contribution]:
        got = self._done.get(ci)
        if got is None:
            got = list(self._extra.get(ci, []))
            for fact_id, cls, table in self._facts:
                d = table.likelihood.get(ci)
                if d is not None:
                    k = table.index[cls]
                    lr = math.log(d[k] / table.healthy[k])
                    got.append(Contribution(fact_id, cls, lr, tuple(table.paths[ci])))
            if not got:
                raise KeyError(ci)
            self._done[ci] = got
        return got

    def __iter__(self) -> Iterator[int]:
        keys = dict.fromkeys(self._extra)
        for _, _, table in self._facts:
            keys.update(dict.fromkeys(table.likelihood))
        return iter(keys)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _hold_unbacked(
    model: CompiledModel,
    observed: dict[str, str],
    logw: list[float],
    only_setup: set[int],
    held: dict[int, list[str]],
) -> None:
    """Cap every cause raised only by setup facts at HELD_SHARE of the catch-all; ``held``
    gets the unknown facts that could back it (the ones raising it most, at most three)."""
    ceiling = logw[model.catch_all] + math.log(HELD_SHARE)
    for ci in sorted(only_setup):
        if logw[ci] <= ceiling:
            continue
        logw[ci] = ceiling
        unknown = (f for f in model.facts if f not in observed and f not in model.setup)
        held[ci] = _raising_most(model, ci, unknown)


def _raising_most(model: CompiledModel, ci: int, facts: Iterable[str]) -> list[str]:
    """Of ``facts``, the (at most three) whose most telling class raises cause ``ci`` most."""
    best: dict[str, float] = {}
    for fact_id in facts:
        table = model.facts.get(fact_id)
        d = table.likelihood.get(ci) if table is not None else None
        if table is not None and d is not None:
            best[fact_id] = max(math.log(x / h) for x, h in zip(d, table.healthy))
    return sorted(best, key=lambda f: (-best[f], f))[:3]


def _hold_unshown(
    model: CompiledModel,
    observed: dict[str, str],
    logw: list[float],
    unshown: frozenset[int] | set[int],
    training: set[int],
    held: dict[int, list[str]],
) -> None:
    """Cap every display-only cause no reported symptom backs at HELD_SHARE of the best fault
    of the training itself: a cause that changes training, that some evidence backs and that
    the evidence already prefers to the catch-all. A number printed wrongly does not outrank
    such a fault unless someone reported what the number showed. ``held`` gets the unknown
    symptom facts that would back it (the ones raising it most, at most three)."""
    floor = logw[model.catch_all]
    rivals = [logw[i] for i in training if i != model.catch_all and logw[i] > floor]
    if not unshown or not rivals:
        return
    ceiling = max(rivals) + math.log(HELD_SHARE)
    for ci in sorted(unshown):
        if logw[ci] <= ceiling:
            continue
        logw[ci] = ceiling
        held[ci] = _raising_most(model, ci, (f for f in model.symptoms if f not in observed))


def log_weights(
    model: CompiledModel,
    observed: dict[str, str],
    extra: dict[int, list[Contribution]] | None = None,
) -> list[float]:
    """The posterior's log weights without the explanation (the rule tests' fast path)."""
    return _weights(model, observed, extra)[0]


def rank_of(
    causes: list[str], logw: list[float], ci: int, ascending: list[float] | None = None
) -> int:
    """0-based position of cause ``ci`` in :meth:`Posterior.ranking` order without sorting the
    causes: bisection in ``ascending`` (``sorted(logw)``, shared between calls) or, without it,
    one count of the larger weights; a name comparison only among exact ties."""
    mine, name = logw[ci], causes[ci]
    if ascending is None:
        ahead = sum(map(mine.__lt__, logw))
        ties = logw.count(mine)
    else:
        above = bisect.bisect_right(ascending, mine)
        ahead = len(ascending) - above
        ties = above - bisect.bisect_left(ascending, mine)
    if ties > 1:
        ahead += sum(1 for i, x in enumerate(logw) if x == mine and causes[i] < name)
    return ahead


def posterior(
    model: CompiledModel,
    observed: dict[str, str],
    extra: dict[int, list[Contribution]] | None = None,
) -> Posterior:
    """``observed`` maps fact id -> class label (unobserved facts are simply absent).

    ``extra`` adds log-likelihood terms that do not come from a fact table (a fix whose verify
    failed or passed).
    """
    logw, held = _weights(model, observed, extra)
    top = max(logw)
    ws = [math.exp(x - top) for x in logw]
    total = sum(ws)
    explained = Explanation(model, observed, extra)
    inner = Posterior(model.causes, [w / total for w in ws], logw, explained, held)
    if not model.parent:
        return inner
    # A cause with modes is the sum of its modes (a mixture): its evidence is its likeliest
    # mode's, and it is held back only when that mode is.
    leading = {pi: max(m, key=logw.__getitem__) for pi, m in enumerate(model.members)}
    return Posterior(
        model.public,
        [sum(inner.probs[ci] for ci in m) for m in model.members],
        public_log_weights(model, logw),
        _Leading(explained, leading),
        {pi: held[ci] for pi, ci in leading.items() if ci in held},
        inner=inner,
        leading=leading,
    )


def public_log_weights(model: CompiledModel, logw: list[float]) -> list[float]:
    """Log weights of the named causes: each the log-sum-exp of its modes' (unchanged where
    no cause has modes)."""
    if not model.parent:
        return logw
    out = []
    for m in model.members:
        if len(m) == 1:
            out.append(logw[m[0]])
            continue
        top = max(logw[ci] for ci in m)
        out.append(top + math.log(sum(math.exp(logw[ci] - top) for ci in m)))
    return out


class _Leading(Mapping[int, list[Contribution]]):
    """A named cause's contributions: its leading mode's."""

    def __init__(self, inner: Mapping[int, list[Contribution]], leading: dict[int, int]):
        self._inner = inner
        self._leading = leading

    def __getitem__(self, pi: int) -> list[Contribution]:
        return self._inner[self._leading[pi]]

    def __iter__(self) -> Iterator[int]:
        return (pi for pi, ci in self._leading.items() if ci in self._inner)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _entropy(ps: list[float]) -> float:
    return -sum(p * math.log2(p) for p in ps if p > 0)


def expected_gain(model: CompiledModel, post: Posterior, fact_id: str) -> float:
    """Expected reduction of the posterior's entropy (bits) from observing ``fact_id``.

    Causes not linked to the fact predict h like the catch-all; their share of the entropy is
    handled in closed form, so the cost is O(linked causes x classes).
    """
    table = model.facts[fact_id]
    linked = table.likelihood
    probs = post.probs
    if not linked:
        return 0.0
    m_linked = sum(probs[i] for i in linked)
    s_linked = sum(probs[i] * math.log2(probs[i]) for i in linked if probs[i] > 0)
    h_now = post.entropy()
    m_u = max(0.0, 1.0 - m_linked)
    s_u = -h_now - s_linked
    expected_after = 0.0
    for k, hk in enumerate(table.healthy):
        pk = hk * m_u + sum(probs[i] * d[k] for i, d in linked.items())
        if pk <= 0:
            continue
        # Entropy of the posterior after seeing class k.
        acc = 0.0
        for i, d in linked.items():
            q = probs[i] * d[k] / pk
            if q > 0:
                acc += q * math.log2(q)
        ratio = hk / pk
        if m_u > 0:
            acc += ratio * (s_u + math.log2(ratio) * m_u)
        expected_after += pk * (-acc)
    return max(0.0, h_now - expected_after)
