"""What one attached file yielded: findings (fact, value, where, why), curves, warnings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddpadvisor.evidence.files.curve import Curve


@dataclass
class Finding:
    fact: str
    value: Any
    where: str
    detail: str


@dataclass
class Read:
    kind: str
    findings: list[Finding] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was read but settles no fact
    world_size: int | None = None  # stated by a config or launch command (never nvidia-smi)

    def add(self, fact: str, value: Any, where: str, detail: str) -> None:
        self.findings.append(Finding(fact, value, where, detail))

    def extend(self, other: Read) -> None:
        self.findings.extend(other.findings)
        self.curves.extend(other.curves)
        self.warnings.extend(other.warnings)
        self.notes.extend(other.notes)
        self.world_size = self.world_size or other.world_size
