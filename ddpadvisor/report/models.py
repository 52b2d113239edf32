"""The output document of a diagnosis (``--json``), as pydantic models: its JSON Schema is
generated from here (``ddpadvisor schema``) and committed as ``schemas/diagnosis.schema.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = "1.0"

Scalar = bool | int | float | str


class EvidenceItem(BaseModel):
    fact: str
    value: Scalar
    source: str
    where: str | None = None
    detail: str | None = None
    direction: Literal["for", "against"]
    size: float = Field(description="log10 of the likelihood ratio this observation gave the cause")
    path: list[str] = Field(description="Graph path: cause, optional mechanism, finding")


class VerifyOut(BaseModel):
    command: str
    expect: str


class CodeOut(BaseModel):
    before: str | None = None
    after: str


class FixOut(BaseModel):
    id: str
    title: str
    steps: list[str]
    code: CodeOut | None = None
    verify: VerifyOut
    cost: str


class ModeOut(BaseModel):
    id: str
    title: str


class CauseOut(BaseModel):
    id: str
    title: str
    area: str
    rank: int
    score: float = Field(ge=0.0, le=1.0, description="Posterior probability")
    prior: float
    catch_all: bool = False
    mechanism: str
    evidence: list[EvidenceItem]
    waits_on: list[str] = Field(
        [],
        description="Facts still unknown that this cause waits on: setup facts it needs (until "
        "they are known it is held below the best cause that needs none), or, when only the "
        "setup raises it, the symptoms or measurements that would back it (until one does it "
        "is held below the catch-all), or, for a cause that changes only a displayed number, "
        "the symptoms someone would report (until one is, it is held below the training "
        "faults the evidence prefers to the catch-all)",
    )
    mode: ModeOut | None = Field(
        None,
        description="For a cause that goes wrong in one of several ways (its modes), the way "
        "the evidence fits best; the evidence listed is that mode's",
    )
    fixes: list[FixOut]
    references: list[str]


class QuestionOut(BaseModel):
    fact: str
    question: str
    type: str
    choices: list[str] | None = None
    help: str | None = None
    how: Literal["ask", "probe", "trace", "script"]
    probe: str | None = None
    expected_gain: float = Field(ge=0.0, description="Expected entropy reduction, bits")
    cost: float
    gain_per_cost: float


class NextStep(BaseModel):
    """One thing to do next: a question to answer, or a probe, trace or scan to run."""

    id: str = Field(
        description="ask:FACT, probe:NAME, trace, scan or attach; decline it by this id"
    )
    kind: Literal["ask", "probe", "trace", "scan", "attach"]
    title: str = Field(description="The question, or what the run does")
    fact: str | None = Field(None, description="The fact an ask settles")
    settles: list[str] = Field(description="Facts this step would establish, most useful first")
    choices: list[str] | None = Field(None, description="Option values, don't know included")
    labels: dict[str, str] | None = Field(None, description="Option value -> label shown")
    help: str | None = Field(None, description="How to find the answer or run the step")
    command: str | None = None
    decline: list[str] = Field(
        [],
        description="Arguments that decline this step if the user cannot take it: the step "
        "alone (--set ID=unknown), or every step needing what it needs (--without script, "
        "--without machine); a declined step is never offered again",
    )
    expected_gain: float = Field(ge=0.0, description="Expected entropy reduction, bits")
    chance: float = Field(ge=0.0, le=1.0, description="Chance this user can carry it out")
    cost: float
    score: float = Field(description="expected_gain x chance / cost; the list's order")


class IntakeOut(BaseModel):
    """A fact read from the user's own description, with the phrase it came from."""

    fact: str
    value: Scalar
    phrase: str
    origin: Literal["text", "code"] = Field(
        "text", description="text: a phrase of the description; code: a line of code in it"
    )


class ResemblanceOut(BaseModel):
    """A cause the user's own description reads like, and the words they share."""

    cause: str
    score: float = Field(description="Cosine of the description and the cause's account, 0-1")
    standout: float = Field(
        0.0,
        description="How far the score stands above the other causes' scores, in their "
        "standard deviations",
    )
    words: list[str] = Field(description="The description's words that weigh most in the match")


class SupersededValue(BaseModel):
    value: Scalar
    source: str
    where: str | None = None


class FactOut(BaseModel):
    fact: str
    value: Scalar
    source: str
    where: str | None = None
    detail: str | None = None
    question: str
    superseded: list[SupersededValue] = []


class ClaimOut(BaseModel):
    id: str
    text: str
    provenance: list[str]
    verdict: str
    stance: Literal["confirmed", "refuted", "ruled-out"]
    reason: str
    why_here: str = Field(description="How the current evidence bears on the advice")
    causes: list[str]
    references: list[str]
    experiment: str | None = None


class KBInfo(BaseModel):
    dirs: list[str]
    causes: int
    facts: int
    claims: int


class Diagnosis(BaseModel):
    schema_version: str = SCHEMA_VERSION
    tool: str = "ddpadvisor"
    version: str
    lang: Literal["en", "zh"] = Field(
        "en",
        description="Language of the text fields (titles, mechanisms, steps, questions, claims, "
        "summary); ids and keys never change with it",
    )
    kb: KBInfo
    summary: str
    done: bool = Field(
        description="True when the top cause is settled or no question is worth asking"
    )
    verdict: Literal["cause", "undecided", "nothing-fits", "looks-healthy"] = Field(
        "cause",
        description="cause: a catalogued cause leads with a posterior of 0.30 or more; "
        "undecided: a catalogued cause leads below 0.30, a best guess (gather more evidence), "
        "or nothing has been observed yet, or the catch-all leads below 0.30 after a symptom "
        "healthy jobs rarely show; nothing-fits: the catch-all leads with 0.30 or more although "
        "such a symptom was reported; looks-healthy: nothing abnormal seen",
    )
    run_failed: bool = Field(
        False,
        description="A probe or trace run failed (exit 3): the ranking rests only on what it "
        "recorded before; the warnings say which rank and why",
    )
    causes: list[CauseOut]
    next_steps: list[NextStep] = Field(
        [], description="Questions, probes, trace and scan together, best first"
    )
    declined: list[str] = Field(
        [], description="Facts and steps answered don't know: never proposed again"
    )
    verified: dict[str, Literal["failed", "passed"]] = Field(
        {}, description="Fix id -> outcome of its verify command"
    )
    next_questions: list[QuestionOut] = Field(
        description="The questions among next_steps (kept for older consumers)"
    )
    intake: list[IntakeOut] = Field(
        [], description="Facts read from a free-text description (ddpadvisor ask)"
    )
    resemblance: list[ResemblanceOut] = Field(
        [],
        description="Causes a free-text description reads like (at or above the floor where "
        "it counts as evidence), best first",
    )
    facts: list[FactOut]
    claims: list[ClaimOut]
    warnings: list[str]
