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
    causes: list[CauseOut]
    next_questions: list[QuestionOut]
    facts: list[FactOut]
    claims: list[ClaimOut]
    warnings: list[str]
