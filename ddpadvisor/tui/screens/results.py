"""Results: ranked causes with mechanism and fixes, the judged forum advice, plots, facts."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from ddpadvisor.i18n import t
from ddpadvisor.tui.controller import Controller
from ddpadvisor.tui.curves import of_session
from ddpadvisor.tui.messages import CauseHighlighted, ExportWanted
from ddpadvisor.tui.screens.diagnose import ROOMY_HEIGHT, ROOMY_WIDTH
from ddpadvisor.tui.session import show_value
from ddpadvisor.tui.widgets.cause_detail import CauseDetail
from ddpadvisor.tui.widgets.claims import ClaimsPanel
from ddpadvisor.tui.widgets.plots_panel import PlotsPanel
from ddpadvisor.tui.widgets.ranking import RankingList
from ddpadvisor.tui.widgets.summary import SummaryBar

TABS = {"causes": "Causes & fixes", "advice": "Forum advice", "plots": "Plots", "facts": "Facts"}


class ResultsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("c", "tab('causes')", "Causes"),
        Binding("a", "tab('advice')", "Advice"),
        Binding("p", "tab('plots')", "Plots"),
        Binding("i", "tab('facts')", "Facts"),
        Binding("x", "open_fix", "Open fix"),
        Binding("e", "export", "Export"),
    ]

    def __init__(
        self, controller: Controller, tab: str = "causes", *, cause: str | None = None
    ) -> None:
        super().__init__()
        self.controller = controller
        self.initial_tab = tab
        self.initial_cause = cause

    def compose(self) -> ComposeResult:
        yield SummaryBar(id="results-summary")
        with TabbedContent(initial=self.initial_tab, id="results-tabs"):
            with TabPane(t(TABS["causes"]), id="causes"), Horizontal(id="causes-split"):
                yield RankingList(id="results-ranking")
                yield CauseDetail(id="cause-detail")
            with TabPane(t(TABS["advice"]), id="advice"):
                yield ClaimsPanel(detailed=True, id="results-claims")
            with TabPane(t(TABS["plots"]), id="plots"):
                yield PlotsPanel(id="plots-panel")
            with TabPane(t(TABS["facts"]), id="facts"), VerticalScroll():
                yield DataTable(id="facts-table", zebra_stripes=True, cursor_type="row")
                yield Static(id="facts-warnings")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.controller.localise(self)
        self._fit(self.app.size.width, self.app.size.height)
        self.refresh_results()
        ranking = self.query_one(RankingList)
        if self.initial_cause:
            ranking.select_cause(self.initial_cause)
        if self.initial_tab == "causes":  # focusing a widget would switch to its tab
            ranking.focus()

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        self.set_class(width < ROOMY_WIDTH or height < ROOMY_HEIGHT, "-compact")

    def on_screen_resume(self) -> None:
        self.refresh_results()

    def refresh_results(self) -> None:
        session = self.controller.session
        diagnosis = session.current
        self.query_one(SummaryBar).show(diagnosis, len(session.answers))
        tabs = self.query_one(TabbedContent)
        for pane, label in TABS.items():
            tabs.get_tab(pane).label = t(label)
        ranking = self.query_one(RankingList)
        ranking.show(diagnosis)
        self._detail(ranking.selected_cause)
        self.query_one(ClaimsPanel).show(diagnosis.claims)
        self.query_one(PlotsPanel).show(session.trace_dirs, of_session(session.series))
        table: DataTable[Any] = self.query_one("#facts-table", DataTable)
        table.clear(columns=True)
        table.add_columns(*(t(c) for c in ("fact", "value", "source", "where", "overrode")))
        for fact in diagnosis.facts:
            overrode = ", ".join(f"{show_value(s.value)} ({t(s.source)})" for s in fact.superseded)
            table.add_row(
                fact.fact, show_value(fact.value), t(fact.source), fact.where or "", overrode
            )
        warnings = self.query_one("#facts-warnings", Static)
        warnings.update(
            Content(t("Warnings:") + "\n" + "\n".join(f"  ! {w}" for w in diagnosis.warnings))
            if diagnosis.warnings
            else Content("")
        )

    def _detail(self, cause_id: str | None) -> None:
        diagnosis = self.controller.session.current
        cause = next((c for c in diagnosis.causes if c.id == cause_id), diagnosis.causes[0])
        self.query_one(CauseDetail).show(cause)

    @on(CauseHighlighted)
    def _highlighted(self, event: CauseHighlighted) -> None:
        self._detail(event.cause_id)

    @on(RankingList.OptionSelected, "#results-ranking")
    def _cause_chosen(self, event: RankingList.OptionSelected) -> None:
        event.stop()
        self.action_open_fix()

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        # Focus follows the tab: a focused widget on a hidden tab would pull it back.
        target = {
            "causes": "#results-ranking",
            "advice": "#results-claims",
            "plots": "#plots-panel",
            "facts": "#facts-table",
        }[tab]
        self.query_one(target).focus()

    def action_open_fix(self) -> None:
        self.query_one(TabbedContent).active = "causes"
        if not self.query_one(CauseDetail).open_fix():
            self.notify(t("The selected cause has no fix."), severity="warning")

    def action_export(self) -> None:
        self.post_message(ExportWanted())
