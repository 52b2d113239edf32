"""Start (and later "add evidence"): pick what to begin with, or start a guided run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, OptionList
from textual.widgets.option_list import Option

from ddpadvisor.evidence.sources import attached_path
from ddpadvisor.i18n import t
from ddpadvisor.terminal import shown
from ddpadvisor.tui.controller import Controller
from ddpadvisor.tui.screens.describe import paths_in
from ddpadvisor.tui.widgets.error_line import ErrorLine
from ddpadvisor.tui.widgets.paragraph import Paragraph


@dataclass(frozen=True)
class Choice:
    id: str
    label: str
    needs: str | None  # "file" | "folder" | "path" (either) | None
    placeholder: str = ""


CHOICES = (
    Choice("describe", "Describe the problem in my own words (or paste a forum post)…", None),
    Choice("nothing", "Nothing yet: ask me questions", None),
    Choice("script", "A training script (read, never run)…", "file", "path/to/train.py"),
    Choice("trace", "A trace folder from 'ddpadvisor trace'…", "folder", "path/to/trace-dir"),
    Choice("probe", "Probe results from 'ddpadvisor probe'…", "folder", "path/to/probe-dir"),
    Choice("answers", "An answers file or a saved session (.yaml/.json)…", "file", "answers.yaml"),
    Choice("run-probes", "Run the probes now, on this machine", None),
    Choice("run-trace", "Trace my training script now…", "file", "path/to/train.py"),
    Choice(
        "attach",
        "A log, config or env dump I have (a file or a folder)…",
        "path",
        "metrics.csv or runs/",
    ),
)


@dataclass(frozen=True)
class EvidenceResult:
    choice: str
    path: Path | None = None


class EvidenceScreen(ModalScreen[EvidenceResult | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "pick(1)", "Choose", key_display=f"1-{len(CHOICES)}"),
        *(
            Binding(str(n), f"pick({n})", f"Choose {n}", show=False)
            for n in range(2, len(CHOICES) + 1)
        ),
        Binding("escape", "close", "Close"),
    ]

    def __init__(self, controller: Controller, *, start: bool) -> None:
        super().__init__()
        self.controller = controller
        self.start = start
        self.choice: Choice | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="evidence-box", classes="panel dialog"):
            yield Paragraph(
                t(
                    "Which evidence do you have? Answers you give, a script scan, probes and "
                    "a trace all combine; measured facts win over scanned ones, and those "
                    "over answers."
                ),
                id="evidence-intro",
            )
            yield OptionList(
                *(
                    Option(Content.assemble((f"{i} ", "bold $text-accent"), t(c.label)), id=c.id)
                    for i, c in enumerate(CHOICES, start=1)
                ),
                id="evidence-choices",
            )
            yield Input(id="evidence-path")
            yield ErrorLine(id="evidence-error")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.controller.localise(self)
        box = self.query_one("#evidence-box")
        box.border_title = t("Start: what do you have?") if self.start else t("Add evidence")
        box.border_subtitle = t("l: 中文")
        self.query_one("#evidence-path", Input).display = False
        self.query_one("#evidence-choices", OptionList).focus()

    @on(OptionList.OptionSelected, "#evidence-choices")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        choice = next(c for c in CHOICES if c.id == event.option_id)
        self.choice = choice
        self.query_one("#evidence-error", ErrorLine).show("")
        if choice.needs is None:
            self.dismiss(EvidenceResult(choice.id))
            return
        entry = self.query_one("#evidence-path", Input)
        entry.display = True
        entry.placeholder = t(
            "{placeholder}  (Enter to {verb}, Esc to go back)",
            placeholder=t(choice.placeholder),
            verb=_verb(choice),
        )
        entry.focus()

    @on(Input.Submitted, "#evidence-path")
    def _path(self, event: Input.Submitted) -> None:
        event.stop()
        if self.choice is None:
            return
        text = event.value.strip()
        if not text:
            self._error(t("Type a path first."))
            return
        path = Path(text).expanduser()
        if self.choice.needs == "path":  # [KIND:]PATH, as --attach takes it
            value = (paths_in(text) or [text])[0]
            path = Path(value)
            if not attached_path(value).exists():
                self._error(t("{path}: no such file or folder", path=shown(text, one_line=True)))
                return
        if self.choice.needs == "folder" and not path.is_dir():
            self._error(t("{path}: not a folder", path=shown(text, one_line=True)))
            return
        if self.choice.needs == "file" and not path.is_file():
            self._error(t("{path}: no such file", path=shown(text, one_line=True)))
            return
        if self.choice.id == "run-trace":
            self.dismiss(EvidenceResult("run-trace", path))
            return
        problem = self.controller.load_evidence(self.choice.id, path)
        if problem:
            self._error(problem)
            return
        self.dismiss(EvidenceResult(self.choice.id, path))

    def _error(self, message: str) -> None:
        self.query_one("#evidence-error", ErrorLine).show(message)

    def action_pick(self, number: int) -> None:
        choices = self.query_one("#evidence-choices", OptionList)
        choices.highlighted = number - 1
        choices.action_select()

    def action_close(self) -> None:
        entry = self.query_one("#evidence-path", Input)
        if entry.display:
            entry.display = False
            self.choice = None
            self.query_one("#evidence-error", ErrorLine).show("")
            self.query_one("#evidence-choices", OptionList).focus()
            return
        self.dismiss(None)


def _verb(choice: Choice) -> str:
    return t("trace it") if choice.id == "run-trace" else t("load it")
