"""The knowledge-base schema: the single source of truth for what a KB YAML file may say.

Authors write qualitative levels (``strong``, ``common`` ...) or numbers; the models keep what
was written and :mod:`ddpadvisor.kb.levels` maps levels to numbers when the graph is compiled.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

FACT_ID = r"^[a-z][a-z0-9_]*$"
NODE_ID = r"^[a-z0-9][a-z0-9-]*$"

FactType = Literal["bool", "enum", "int", "float", "str"]
Source = Literal["asked", "script", "log", "probe", "trace"]
Verdict = Literal["correct", "partly-correct", "myth", "harmful"]
StrengthLevel = Literal["certain", "strong", "moderate", "weak", "slight"]
PriorLevel = Literal["common", "uncommon", "rare", "very-rare"]
Override = Literal["replace", "append"]

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
# A prior of 0 or 1 would make every diagnosis degenerate (log 0), so it is open at both ends.
PriorProbability = Annotated[float, Field(gt=0.0, lt=1.0)]


# Validation context for entries read back from the KB cache: they passed every check when the
# cache was built, by this same schema (its stamp is part of the cache's name), so the costly
# pattern checks are not run again. Every other validator still runs.
CHECKED = {"checked": True}


def _rechecks(info: ValidationInfo) -> bool:
    return not (isinstance(info.context, dict) and info.context.get("checked"))


def regex_problem(pattern: str) -> str | None:
    """Why a KB pattern is refused: it does not compile, or one attempt to match it can
    backtrack without bound (:func:`ddpadvisor.kb.patterns.backtracking_problem`)."""
    from ddpadvisor.kb.patterns import backtracking_problem

    return backtracking_problem(pattern)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


Translation = dict[str, str | list[str] | dict[str, str]]


class _Translatable(_Strict):
    """An entry whose user-facing text may carry a Chinese version beside the English.

    ``zh`` maps a field name from ``TRANSLATED`` to its Chinese text (a list for list fields,
    a mapping for mapping fields); English stays the fallback for anything left out.
    """

    TRANSLATED: ClassVar[tuple[str, ...]] = ()

    zh: Translation | None = Field(
        None, description="Chinese text of the entry's user-facing fields, keyed by field name."
    )

    @field_validator("zh")
    @classmethod
    def _known_fields(cls, v: Translation | None) -> Translation | None:
        for key in v or {}:
            if key not in cls.TRANSLATED:
                allowed = ", ".join(cls.TRANSLATED)
                raise ValueError(f"zh: {key!r} is not a translated field (one of: {allowed})")
        return v


class StrClass(_Strict):
    """One class of a free-text fact; the first class whose test matches a value wins."""

    label: str
    matches: str | None = Field(None, description="Regular expression searched in the value.")
    version_lt: str | None = Field(None, description="Class applies when the version is lower.")

    @field_validator("matches")
    @classmethod
    def _regex_compiles(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and _rechecks(info):
            problem = regex_problem(v)
            if problem:
                raise ValueError(problem)
        return v


def pattern_problem(pattern: str) -> str | None:
    """Why a mention pattern is unsafe or invalid; None when it is fine."""
    return regex_problem(pattern)


class Condition(_Strict):
    """A predicate on one fact's answer (the same forms as a link: is / in / ge / lt)."""

    fact: str = Field(pattern=FACT_ID)
    is_: bool | str | int | float | None = Field(None, alias="is")
    in_: list[str] | None = Field(None, alias="in")
    ge: float | None = None
    lt: float | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _one_predicate(self) -> Condition:
        preds = [x for x in (self.is_, self.in_, self.ge, self.lt) if x is not None]
        if not preds:
            raise ValueError("a condition needs a predicate: is, in, ge or lt")
        if (self.is_ is not None or self.in_ is not None) and len(preds) > 1:
            raise ValueError("use one of is / in, or ge and/or lt")
        return self


class Implication(_Strict):
    """One answer settling another fact: when this fact's answer matches, ``then`` holds too."""

    is_: bool | str | int | float | None = Field(None, alias="is")
    in_: list[str] | None = Field(None, alias="in")
    ge: float | None = None
    lt: float | None = None
    then: dict[str, bool | int | float | str] = Field(min_length=1)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Mention(_Strict):
    """Phrases in a user's own description that state this fact's value.

    Each pattern is a regular expression searched case-insensitively; a named group ``value``
    (``(?P<value>\\d+)``) supplies the value of a number or text fact instead of ``value``.
    """

    value: bool | int | float | str | None = None
    en: list[str] = []
    zh: list[str] = []

    @field_validator("en", "zh")
    @classmethod
    def _safe(cls, v: list[str], info: ValidationInfo) -> list[str]:
        for pattern in v if _rechecks(info) else ():
            msg = pattern_problem(pattern)
            if msg:
                raise ValueError(f"mention pattern {pattern!r}: {msg}")
        return v


class Fact(_Translatable):
    """An observation: something asked, scanned, probed or traced."""

    TRANSLATED = ("question", "help", "labels")

    id: str = Field(pattern=FACT_ID)
    type: FactType
    question: str = Field(description="What a human is asked; also the label in reports.")
    help: str | None = Field(None, description="How to find the answer.")
    sources: list[Source] = Field(min_length=1)
    values: list[str] | None = Field(None, description="Allowed values of an enum fact.")
    bins: list[float] | None = Field(
        None, description="Ascending edges that cut an int/float fact into classes."
    )
    classes: list[StrClass] | None = Field(
        None, description="Classes of a str fact; the last one should be a catch-all."
    )
    min: float | None = Field(
        None, description="Smallest value an int/float fact can take (a count of GPUs: 1)."
    )
    max: float | None = Field(None, description="Largest value an int/float fact can take.")
    exclusive_min: float | None = Field(
        None, description="The value must be above this (Adam's betas: 0)."
    )
    exclusive_max: float | None = Field(
        None, description="The value must be below this (Adam's betas: 1)."
    )
    healthy: dict[str, Probability] | None = Field(
        None,
        description="Distribution of the fact's classes in a job without any catalogued fault "
        "(the leak); classes left out share what remains; default uniform.",
    )
    cost: float = Field(1.0, gt=0, description="Relative cost of asking (1 = one easy question).")
    probe: str | None = Field(None, description="The probe that measures this fact.")
    needs_gpu: bool = False
    labels: dict[str, str] | None = Field(
        None,
        description="The option shown to a person for each value (bool: true/false; enum: its "
        "values; 'unknown' for don't know); zh.labels gives the Chinese.",
    )
    ask_if: list[Condition] = Field(
        [],
        description="Preconditions: the question is asked only once every condition's fact is "
        "known and holds (nothing presupposes an answer not given).",
    )
    skip_if: list[Condition] = Field(
        [],
        description="The question is not asked once any of these holds on a known fact (no GPU "
        "or NCCL question for a job on CPUs with gloo).",
    )
    settled_by: list[str] = Field(
        [], description="Facts whose known value makes this question redundant."
    )
    implies: list[Implication] = Field(
        [], description="Answers of this fact that settle other facts as well."
    )
    derived_from: list[Condition] = Field(
        [],
        description="A bool fact that is the conjunction of these conditions on other facts: "
        "true once every one holds on a known value, false once one is known not to hold. For a "
        "combination healthy jobs rarely show although each part is common (fp16 autocast and no "
        "GradScaler), which the per-fact healthy rates, taken as independent, cannot express.",
    )
    answerable: Probability | None = Field(
        None,
        description="Chance that a person asked can give an answer other than don't know "
        "(default by cost).",
    )
    no_fault: dict[str, Probability] | None = Field(
        None,
        description="Distribution of the classes in a job with no fault at all: what the "
        "catch-all 'other' predicts; a symptom rare here lowers 'no fault'. Default: healthy.",
    )
    context: bool = Field(
        False,
        description="Describes the setup (precision, accumulation, ...): a cause that needs a "
        "value of it cannot lead while it is unknown.",
    )
    mentions: list[Mention] = Field(
        [], description="Patterns that find this fact in a free-text description (intake)."
    )
    override: Override | None = None

    @model_validator(mode="after")
    def _type_shape(self) -> Fact:
        if self.override is not None:
            return self
        if self.type == "enum" and not self.values:
            raise ValueError("an enum fact needs 'values'")
        if self.type != "enum" and self.values:
            raise ValueError("'values' is only for enum facts")
        if self.bins is not None:
            if self.type not in ("int", "float"):
                raise ValueError("'bins' is only for int and float facts")
            if list(self.bins) != sorted(set(self.bins)):
                raise ValueError("'bins' must be strictly ascending")
        if self.classes is not None and self.type != "str":
            raise ValueError("'classes' is only for str facts")
        bounds = (self.min, self.max, self.exclusive_min, self.exclusive_max)
        if any(b is not None for b in bounds):
            if self.type not in ("int", "float"):
                raise ValueError("'min'/'max' are only for int and float facts")
            if not all(math.isfinite(b) for b in bounds if b is not None):
                raise ValueError("'min'/'max' must be finite numbers")
            low = [b for b in (self.min, self.exclusive_min) if b is not None]
            high = [b for b in (self.max, self.exclusive_max) if b is not None]
            if low and high and max(low) >= min(high):
                raise ValueError(
                    "the fact's range is empty: its lower bound is not below its upper"
                )
        return self


class Link(_Strict):
    """Evidence: a predicate on a fact and how strongly a cause or mechanism makes it true.

    ``strength`` is the noisy-OR link probability q (P(predicate true | only this cause acts),
    beyond the healthy leak). ``p`` instead states P(predicate true | cause) outright; a ``p``
    below the healthy rate argues against the cause when the predicate holds.
    """

    fact: str = Field(pattern=FACT_ID)
    is_: bool | str | int | float | None = Field(None, alias="is")
    in_: list[str] | None = Field(None, alias="in")
    ge: float | None = None
    lt: float | None = None
    strength: StrengthLevel | Probability | None = None
    p: Probability | None = None
    why: str | None = Field(None, description="One line on why the cause moves this fact.")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _one_predicate_one_weight(self) -> Link:
        preds = [x for x in (self.is_, self.in_, self.ge, self.lt) if x is not None]
        if len(preds) == 0:
            raise ValueError("a link needs a predicate: is, in, ge or lt")
        if (self.is_ is not None or self.in_ is not None) and len(preds) > 1:
            raise ValueError("use one of is / in, or ge and/or lt")
        if (self.strength is None) == (self.p is None):
            raise ValueError("a link needs exactly one of 'strength' or 'p'")
        return self


class MechanismLink(_Strict):
    """A cause (or mechanism) acting through an intermediate mechanism node."""

    mechanism: str = Field(pattern=NODE_ID)
    strength: StrengthLevel | Probability


class Reference(_Strict):
    url: str = Field(pattern=r"^https?://")
    note: str | None = None


class Verify(_Strict):
    command: str = Field(min_length=1)
    expect: str = Field(min_length=1, description="What the output must show when fixed.")


class Code(_Strict):
    before: str | None = None
    after: str


class Fix(_Translatable):
    # "expect" translates verify.expect (kept at the fix's level, beside the other texts).
    TRANSLATED = ("title", "steps", "expect")

    id: str = Field(pattern=NODE_ID)
    title: str
    steps: list[str] = Field(min_length=1)
    code: Code | None = None
    verify: Verify
    cost: Literal["trivial", "low", "medium", "high"] = "low"
    references: list[Reference] = []
    override: Override | None = None


class Mechanism(_Translatable):
    """An intermediate node (e.g. 'replicas diverged'): several causes share its findings."""

    TRANSLATED = ("title", "description")

    id: str = Field(pattern=NODE_ID)
    title: str
    description: str | None = None
    evidence: list[Link] = []
    override: Override | None = None


class CauseMode(_Translatable):
    """One of the ways a cause goes wrong that exclude each other (a scheduler stepped on every
    micro-batch, or its total counted over the whole dataset): each mode adds its own evidence
    links to the cause's, and the cause's probability is the sum over its modes, so a finding
    only one mode predicts does not count against the cause when another mode fits."""

    TRANSLATED = ("title",)

    id: str = Field(pattern=NODE_ID)
    title: str = Field(description="What happens in this mode, shown beside the cause.")
    share: float = Field(
        gt=0,
        le=1,
        description="This mode's share of the cause's prior (a cause's shares are normalised).",
    )
    via: list[MechanismLink] = []
    evidence: list[Link] = []

    @model_validator(mode="after")
    def _says_something(self) -> CauseMode:
        if not self.via and not self.evidence:
            raise ValueError("a mode needs evidence or a via link of its own")
        return self


class Cause(_Translatable):
    TRANSLATED = ("title", "mechanism")

    id: str = Field(pattern=NODE_ID)
    title: str
    area: str
    prior: PriorLevel | PriorProbability
    mechanism: str = Field(min_length=1, description="Why it produces the symptom.")
    reports: list[str] = Field(
        [],
        description="How people typically describe this problem in a post or an issue, in any "
        "language (English and Chinese side by side; not translations of each other): what they "
        "see, what they changed, the words and names they use. A user's own description is "
        "compared with these (and the rest of the cause's text) to rank the cause; they are "
        "never shown.",
    )
    via: list[MechanismLink] = []
    evidence: list[Link] = []
    fixes: list[str] = []
    references: list[Reference] = []
    related: list[str] = Field([], description="Old ids that resolve to this cause.")
    changes: Literal["training", "display"] = Field(
        "training",
        description="What the fault changes: the training itself, or only a number shown "
        "about it (a logged loss, an evaluated metric). A display-only cause explains only a "
        "symptom someone saw; until such a symptom is reported it stays below the causes that "
        "change training and the catch-all.",
    )
    modes: list[CauseMode] = Field(
        [],
        description="Ways of going wrong that exclude each other, at least two: the cause's "
        "own links hold in every mode, each mode adds its own (see CauseMode).",
    )
    override: Override | None = None

    @field_validator("modes")
    @classmethod
    def _modes_distinct(cls, v: list[CauseMode]) -> list[CauseMode]:
        ids = [m.id for m in v]
        if len(ids) == 1:
            raise ValueError("a cause with modes has at least two")
        if len(set(ids)) != len(ids):
            raise ValueError("two modes share an id")
        return v


class Claim(_Translatable):
    """A piece of forum advice with a verdict."""

    TRANSLATED = ("text", "reason")

    id: str = Field(pattern=NODE_ID)
    text: str = Field(description="The advice, in English.")
    provenance: list[str] = Field(min_length=1)
    verdict: Verdict
    reason: str
    references: list[Reference] = []
    experiment: str | None = Field(
        None, description="A test (path::name) that demonstrates the verdict."
    )
    causes: list[str] = []
    facts: list[str] = []
    keywords: list[str] = []
    override: Override | None = None

    @field_validator("provenance")
    @classmethod
    def _provenance_form(cls, v: list[str]) -> list[str]:
        for item in v:
            if not re.fullmatch(r"[0-9]{3}:[0-9]+", item):
                raise ValueError(f"provenance {item!r} is not of the form 000:N")
        return v

    @model_validator(mode="after")
    def _backed(self) -> Claim:
        if self.override is None and not self.references and not self.experiment:
            raise ValueError("a claim needs a reference URL or an experiment test")
        return self


class RuleTest(_Strict):
    """A Semgrep-style test: facts in, a ranking expectation out."""

    id: str = Field(pattern=NODE_ID)
    description: str | None = None
    facts: dict[str, bool | int | float | str] = {}
    text: str | None = Field(
        None, description="A free-text description; its intake findings join 'facts'."
    )
    expect_facts: dict[str, bool | int | float | str] = Field(
        {}, description="Facts the intake must find in 'text' (fact id -> value)."
    )
    expect_top: str | None = Field(None, description="This cause must rank first.")
    expect_in_top: list[str] = Field([], description="These causes must be in the top k.")
    k: int = Field(3, ge=1)
    expect_below: list[tuple[str, str]] = Field(
        [], description="Pairs [a, b]: cause a must rank below cause b."
    )
    expect_not_top: list[str] = Field([], description="These causes must not rank first.")
    todo: str | None = Field(None, description="Known gap: a failure is reported, not counted.")

    @model_validator(mode="after")
    def _has_expectation(self) -> RuleTest:
        if not (
            self.expect_top
            or self.expect_in_top
            or self.expect_below
            or self.expect_not_top
            or self.expect_facts
        ):
            raise ValueError("a rule test needs at least one expect_* field")
        if self.expect_facts and not self.text:
            raise ValueError("'expect_facts' needs a 'text' to read them from")
        return self


class KBFile(_Strict):
    """The top level of one KB YAML file; every section is optional."""

    facts: list[Fact] = []
    mechanisms: list[Mechanism] = []
    causes: list[Cause] = []
    fixes: list[Fix] = []
    claims: list[Claim] = []
    tests: list[RuleTest] = []
