"""The one currency between evidence sources and the engine.

Every source (answers, script scan, probe results, trace) turns what it saw into
:class:`Observation` objects through :func:`observe`, the only place that types a raw value
against its KB fact, and hands them over in a :class:`Gathered`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from ddpadvisor.kb.resemblance import Resemblance
from ddpadvisor.kb.values import parse_value

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase

ObsSource = Literal["description", "answer", "set", "script", "log", "probe", "trace"]

# Measured beats scanned beats asked (SPEC: "the measured one wins"). A file the run itself
# wrote (its log, config, environment dump: ``--attach``) is its own record, so above what was
# answered or scanned, and below what ddpadvisor measured itself. A fact read from the user's
# own description is a proposal: it counts until the user confirms or corrects it, and any
# answer, scan or measurement overrules it (and says so in the warnings). Each evidence source
# declares its rank in the registry (ddpadvisor/evidence/sources); the engine reads this copy,
# which a test holds equal to the registry's.
PRECEDENCE: dict[str, int] = {
    "description": -1,
    "answer": 0,
    "set": 1,
    "script": 2,
    "log": 3,
    "probe": 4,
    "trace": 4,
}


# What a measured step needs that a user may not have: their training script (scan, trace) or a
# machine to launch on (probe, trace). "without:NEED" among the declined ids says they lack it.
NEEDS = ("script", "machine")


class Observation(BaseModel):
    """A fact's value as one source saw it.

    ``where`` locates it (``train.py:42``, ``rank 1 step 37``, ``answers.yaml:3``) and
    ``detail`` says in words what was seen ("replicas diverged at step 37: fc.weight (rank 1)").
    """

    model_config = ConfigDict(frozen=True)

    fact: str
    value: bool | int | float | str
    source: ObsSource
    where: str | None = None
    detail: str | None = None


class UnknownFact(LookupError):
    """A fact id the knowledge base does not define."""


def observe(
    kb: KnowledgeBase,
    fact_id: str,
    raw: Any,
    source: ObsSource,
    where: str | None = None,
    detail: str | None = None,
) -> Observation | None:
    """Type ``raw`` by its fact and wrap it; None when the value means "unknown".

    Raises :class:`UnknownFact` for an id the KB lacks and
    :class:`ddpadvisor.kb.values.ValueProblem` for a value that does not fit the fact; each
    source decides whether that is an error (answers) or a warning (measured files).
    """
    spec = kb.facts.get(fact_id)
    if spec is None:
        raise UnknownFact(fact_id)
    value = parse_value(spec, raw)
    if value is None:
        return None
    return Observation(fact=fact_id, value=value, source=source, where=where, detail=detail)


@dataclass
class Gathered:
    """What the sources found: observations, warnings, and whether a run failed (exit 3)."""

    observations: list[Observation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failed: bool = False  # a probe or trace run failed: exit 3, but keep what was gathered
    # Facts and steps the user answered "don't know" to: never proposed again.
    declined: list[str] = field(default_factory=list)
    # Fix id -> "failed" | "passed": the outcome of the fix's verify command.
    verified: dict[str, str] = field(default_factory=dict)
    # Causes a free-text description reads like (kb/resemblance.py), best first.
    resemblance: list[Resemblance] = field(default_factory=list)

    def extend(self, other: Gathered) -> None:
        self.observations.extend(other.observations)
        self.warnings.extend(other.warnings)
        self.failed = self.failed or other.failed
        self.declined.extend(d for d in other.declined if d not in self.declined)
        self.verified.update(other.verified)
        if other.resemblance:  # two descriptions of one problem: each cause keeps its best
            best = {r.cause: r for r in self.resemblance}
            for r in other.resemblance:
                if r.cause not in best or r.score > best[r.cause].score:
                    best[r.cause] = r
            self.resemblance = sorted(best.values(), key=lambda r: (-r.score, r.cause))
