"""What a screen may ask of the app, given to it in its constructor.

Screens never import the app: they read the session through this protocol, ask the app to
change it (only the app changes the session), and navigate by posting the messages in
:mod:`ddpadvisor.tui.messages` or by returning a result with ``dismiss``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from ddpadvisor.evidence.intake import Finding
    from ddpadvisor.kb.resemblance import Resemblance
    from ddpadvisor.tui.session import Session


class Controller(Protocol):
    @property
    def session(self) -> Session:
        """The session, to read; change it through the methods below."""
        ...

    def localise(self, node: DOMNode) -> None:
        """Give ``node``'s key bindings their description in the current language."""
        ...

    def answer(self, fact: str, raw: Any) -> str | None:
        """Record an answer (None: don't know); the one-line problem when it does not fit."""
        ...

    def skip(self, fact: str, step: str | None) -> None:
        """Decline a question, or the probe/trace/scan step ``step``."""
        ...

    def describe(self, findings: list[Finding], resemblance: list[Resemblance]) -> None:
        """Facts and resemblance the user confirmed from their description (added to any
        earlier description)."""
        ...

    def load_evidence(self, kind: str, path: Path) -> str | None:
        """Load a source; the one-line problem, or None."""
        ...

    def export(self, path: Path, fmt: str) -> str | None:
        """Save the session; the one-line problem, or None."""
        ...
