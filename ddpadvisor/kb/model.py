"""The loaded knowledge base and where each entry came from; no loading logic lives here."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpadvisor.errors import InputError
from ddpadvisor.kb.schema import Cause, Claim, Fact, Fix, Mechanism, RuleTest

# The id of the engine's catch-all cause ("no catalogued fault"); no KB cause may take it.
CATCH_ALL = "other"


@dataclass(frozen=True)
class Origin:
    file: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class Problem:
    origin: Origin
    message: str

    def __str__(self) -> str:
        return f"{self.origin}: {self.message}"

    def to_error(self) -> InputError:
        return InputError(self.message, self.origin.file, self.origin.line)


@dataclass
class KnowledgeBase:
    facts: dict[str, Fact] = field(default_factory=dict)
    mechanisms: dict[str, Mechanism] = field(default_factory=dict)
    causes: dict[str, Cause] = field(default_factory=dict)
    fixes: dict[str, Fix] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    tests: list[RuleTest] = field(default_factory=list)
    origins: dict[tuple[str, str], Origin] = field(default_factory=dict)
    test_origins: list[Origin] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)

    def origin(self, kind: str, id_: str) -> Origin:
        return self.origins.get((kind, id_), Origin("<kb>", None))

    def resolve_cause(self, id_: str) -> str | None:
        if id_ in self.causes:
            return id_
        return self.aliases.get(id_)

    def raise_first_problem(self) -> None:
        if self.problems:
            raise self.problems[0].to_error()
