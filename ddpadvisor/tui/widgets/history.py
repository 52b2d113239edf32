"""Answers given so far (in the order given, "don't know" included) and facts from other
sources; Enter changes one."""

from __future__ import annotations

from typing import Any

from textual import events, on
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ddpadvisor.i18n import t
from ddpadvisor.report.models import FactOut
from ddpadvisor.tui.layout_text import hang
from ddpadvisor.tui.messages import EditAnswer
from ddpadvisor.tui.session import TUI_WHERE, show_value


def fact_line(number: int | None, fact: FactOut, width: int = 0) -> Content:
    label = f"{number:>2}. " if number is not None else "    "
    source = t(fact.source)
    origin = source if fact.where in (None, TUI_WHERE) else f"{source} · {fact.where}"
    body = Content.assemble(
        (fact.fact, "bold"),
        f" = {show_value(fact.value)}",
        (f"  {origin}", "$text-muted"),
    )
    return hang(Content.styled(label, "$text-muted"), body, width)


def unknown_line(number: int, fact_id: str, width: int = 0) -> Content:
    """A question answered "don't know": listed, so that it can be answered after all."""
    body = Content.assemble((fact_id, "bold"), " = ", (t("don't know"), "italic"))
    return hang(Content.styled(f"{number:>2}. ", "$text-muted"), body, width)


class HistoryList(OptionList):
    DEFAULT_CLASSES = "panel"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = t("Evidence · Enter changes an answer")
        self.order: list[str] = []
        self.facts: list[FactOut] = []

    def show(self, order: list[str], facts: list[FactOut]) -> None:
        """``order``: facts answered (or said "don't know" to), oldest first; the facts from
        other sources follow by name."""
        self.order, self.facts = order, facts
        self.border_title = t("Evidence · Enter changes an answer")
        self._rebuild()

    def on_resize(self, event: events.Resize) -> None:
        self._rebuild()

    def _rebuild(self) -> None:
        order, facts = self.order, self.facts
        width = self.scrollable_content_region.width
        keep = self.highlighted_option.id if self.highlighted_option else None
        by_fact = {f.fact: f for f in facts}
        options = []
        for n, fact_id in enumerate(order, start=1):
            line = (
                fact_line(n, by_fact[fact_id], width)
                if fact_id in by_fact
                else unknown_line(n, fact_id, width)
            )
            options.append(Option(line, id=fact_id))
        for fact in facts:
            if fact.fact not in order:
                options.append(Option(fact_line(None, fact, width), id=fact.fact))
        self.set_options(options)
        ids = [o.id for o in options]
        if keep in ids:
            self.highlighted = ids.index(keep)

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_id:
            self.post_message(EditAnswer(event.option_id))
