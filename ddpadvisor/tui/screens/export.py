"""Save the session: a Markdown report, or the same JSON document `--json` prints."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input

from ddpadvisor.i18n import t
from ddpadvisor.tui.controller import Controller
from ddpadvisor.tui.messages import ReportExported
from ddpadvisor.tui.widgets.error_line import ErrorLine
from ddpadvisor.tui.widgets.paragraph import Paragraph

DEFAULT_NAMES = {"markdown": "ddpadvisor-report.md", "json": "ddpadvisor-session.json"}


def format_for(path: Path) -> str:
    return "json" if path.suffix.lower() == ".json" else "markdown"


class ExportScreen(ModalScreen[Path | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel"),
    ]

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box", classes="panel dialog"):
            yield Paragraph(
                t(
                    "A .json name saves the --json document (load it again with o); any "
                    "other name saves a Markdown report. Enter saves."
                ),
                id="export-help",
            )
            yield Input(DEFAULT_NAMES["markdown"], id="export-path")
            with Horizontal(id="export-buttons"):
                yield Button("Markdown", id="as-markdown")
                yield Button("JSON", id="as-json")
            yield ErrorLine(id="export-error")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.controller.localise(self)
        self.query_one("#export-box").border_title = t("Export the session")
        self.query_one("#export-path", Input).focus()

    def action_as_format(self, fmt: str) -> None:
        entry = self.query_one("#export-path", Input)
        current = Path(entry.value.strip() or DEFAULT_NAMES[fmt])
        stem = current.with_suffix("") if current.suffix else current
        entry.value = str(stem.with_suffix(".json" if fmt == "json" else ".md"))
        entry.focus()

    @on(Button.Pressed)
    def _format_button(self, event: Button.Pressed) -> None:
        self.action_as_format("json" if event.button.id == "as-json" else "markdown")

    @on(Input.Submitted, "#export-path")
    def _save(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.query_one("#export-error", ErrorLine).show(t("Type a file name."))
            return
        path = Path(text).expanduser()
        fmt = format_for(path)
        problem = self.controller.export(path, fmt)
        if problem:
            self.query_one("#export-error", ErrorLine).show(problem)
            return
        self.post_message(ReportExported(path, fmt))
        self.notify(t("Saved {fmt} to {path}", fmt=fmt, path=text), timeout=3)
        self.dismiss(path)

    def action_close(self) -> None:
        self.dismiss(None)
