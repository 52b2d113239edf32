"""Typed messages between widgets, screens and workers (tests assert on these)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.message import Message

from ddpadvisor.report.models import CauseOut, Diagnosis, FixOut
from ddpadvisor.tui.runners import RunOutcome, RunProgress, RunRequest


class AnswerChosen(Message):
    """The user answered the shown question; ``value`` None means "don't know"."""

    def __init__(self, fact: str, value: Any) -> None:
        super().__init__()
        self.fact = fact
        self.value = value


class VerifyReported(Message):
    """The repair loop: the user ran a fix's verify command and says how it went."""

    def __init__(self, fix_id: str, outcome: str, cause_id: str) -> None:
        super().__init__()
        self.fix_id = fix_id
        self.outcome = outcome
        self.cause_id = cause_id


class QuestionSkipped(Message):
    """A question answered "don't know", or a probe, trace or scan step declined ("not now")."""

    def __init__(self, fact: str, step: str | None = None) -> None:
        super().__init__()
        self.fact = fact
        self.step = step  # the declined step's id (probe:NAME, trace, scan); None for a question


class RunAsked(Message):
    """A probe or trace offered as the next step was accepted."""

    def __init__(self, kind: str, probe: str | None) -> None:
        super().__init__()
        self.kind = kind
        self.probe = probe


class CauseHighlighted(Message):
    def __init__(self, cause_id: str) -> None:
        super().__init__()
        self.cause_id = cause_id


class EditAnswer(Message):
    """Go back to an earlier answer to change it."""

    def __init__(self, fact: str) -> None:
        super().__init__()
        self.fact = fact


class DiagnosisUpdated(Message):
    """The evidence changed and the engine re-ranked the causes."""

    def __init__(self, diagnosis: Diagnosis, reason: str) -> None:
        super().__init__()
        self.diagnosis = diagnosis
        self.reason = reason

    @property
    def top(self) -> str:
        return self.diagnosis.causes[0].id


class RunStarted(Message):
    def __init__(self, request: RunRequest) -> None:
        super().__init__()
        self.request = request


class RunProgressed(Message):
    def __init__(self, progress: RunProgress) -> None:
        super().__init__()
        self.progress = progress


class RunFinished(Message):
    def __init__(self, request: RunRequest, outcome: RunOutcome) -> None:
        super().__init__()
        self.request = request
        self.outcome = outcome


class RunEnded(Message):
    """The run did not produce an outcome: cancelled by the user, or it crashed."""

    def __init__(self, request: RunRequest, cancelled: bool, error: str = "") -> None:
        super().__init__()
        self.request = request
        self.cancelled = cancelled
        self.error = error


class EvidenceLoaded(Message):
    def __init__(self, kind: str, path: Path, count: int) -> None:
        super().__init__()
        self.kind = kind
        self.path = path
        self.count = count


class ReportExported(Message):
    def __init__(self, path: Path, fmt: str) -> None:
        super().__init__()
        self.path = path
        self.fmt = fmt


class FixChosen(Message):
    def __init__(self, cause: CauseOut, fix: FixOut) -> None:
        super().__init__()
        self.cause = cause
        self.fix = fix


# -- navigation: a screen asks the app to open another one -----------------------------------------
class ResultsWanted(Message):
    """Open the results screen, on ``tab``, with ``cause`` selected."""

    def __init__(self, tab: str = "causes", cause: str | None = None) -> None:
        super().__init__()
        self.tab = tab
        self.cause = cause


class ExportWanted(Message):
    """Open the export dialog."""


class EvidenceWanted(Message):
    """Open the "add evidence" dialog."""


class ProbesWanted(Message):
    """Run probes (``probes`` empty: every probe)."""

    def __init__(self, probes: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.probes = probes


class TraceWanted(Message):
    """Trace the training script (the one loaded, else ask for its path)."""
