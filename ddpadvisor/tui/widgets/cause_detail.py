"""A cause in full on the results screen: why, mechanism, references, and its fixes to open."""

from __future__ import annotations

from typing import Any

from textual import events, on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ddpadvisor.i18n import t
from ddpadvisor.report.models import CauseOut
from ddpadvisor.tui.messages import FixChosen
from ddpadvisor.tui.widgets.why import explain


class CauseDetail(VerticalScroll):
    DEFAULT_CLASSES = "panel"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cause: CauseOut | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="cause-body")
        yield Static(id="cause-fixes-title")
        yield OptionList(id="cause-fixes")
        yield Static(id="cause-refs", classes="muted")

    def show(self, cause: CauseOut) -> None:
        self.cause = cause
        self.border_title = f"#{cause.rank} {cause.id}"
        self.query_one("#cause-body", Static).update(
            explain(cause, width=self.scrollable_content_region.width)
        )
        fixes = self.query_one("#cause-fixes", OptionList)
        title = self.query_one("#cause-fixes-title", Static)
        if cause.fixes:
            title.update(Content.styled("\n" + t("Fixes · Enter opens one"), "bold"))
            fixes.set_options(
                Option(
                    Content.assemble(
                        (f"{i} ", "bold $text-accent"),
                        fix.title,
                        (t("  ({cost})", cost=t(fix.cost)), "$text-muted"),
                    ),
                    id=fix.id,
                )
                for i, fix in enumerate(cause.fixes, start=1)
            )
            fixes.display = True
        else:
            title.update(
                Content.styled("\n" + t("No fix: this is not a fault to repair."), "$text-muted")
            )
            fixes.clear_options()
            fixes.display = False
        refs = "\n".join(f"  {url}" for url in cause.references)
        self.query_one("#cause-refs", Static).update(
            Content(t("References:") + "\n" + refs) if refs else Content("")
        )
        self.scroll_home(animate=False)

    def on_resize(self, event: events.Resize) -> None:
        if self.cause is not None:
            self.query_one("#cause-body", Static).update(
                explain(self.cause, width=self.scrollable_content_region.width)
            )

    def open_fix(self, number: int | None = None) -> bool:
        """Open the numbered fix (1-based) or the highlighted one."""
        if self.cause is None or not self.cause.fixes:
            return False
        fixes = self.query_one("#cause-fixes", OptionList)
        index = (number - 1) if number is not None else (fixes.highlighted or 0)
        if not 0 <= index < len(self.cause.fixes):
            return False
        self.post_message(FixChosen(self.cause, self.cause.fixes[index]))
        return True

    @on(OptionList.OptionSelected, "#cause-fixes")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.open_fix(event.option_index + 1)
