"""The question loop: the next question beside the live ranking, why, advice and history."""

from __future__ import annotations

from typing import ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer

from ddpadvisor.i18n import t
from ddpadvisor.tui.controller import Controller
from ddpadvisor.tui.messages import (
    AnswerChosen,
    CauseHighlighted,
    DiagnosisUpdated,
    EditAnswer,
    EvidenceWanted,
    ExportWanted,
    ProbesWanted,
    QuestionSkipped,
    ResultsWanted,
    RunAsked,
    TraceWanted,
)
from ddpadvisor.tui.session import Prompt, step_of
from ddpadvisor.tui.widgets.claims import ClaimsPanel
from ddpadvisor.tui.widgets.history import HistoryList
from ddpadvisor.tui.widgets.question import QuestionPanel
from ddpadvisor.tui.widgets.ranking import RankingList
from ddpadvisor.tui.widgets.summary import SummaryBar
from ddpadvisor.tui.widgets.why import WhyPanel

# Below this size the screen is compact: question + one detail pane chosen with `v`.
ROOMY_WIDTH, ROOMY_HEIGHT = 110, 34
VIEWS = ("ranking", "why", "advice", "history")


class DiagnoseScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "choose(1)", "Answer", key_display="1-9"),
        *(Binding(str(n), f"choose({n})", f"Answer {n}", show=False) for n in range(2, 10)),
        Binding("0", "choose(0)", "Don't know", show=False),
        Binding("d", "dont_know", "Unknown"),
        Binding("s", "skip", "Skip"),
        Binding("b", "back", "Back"),
        Binding("v", "cycle_view", "View"),
        Binding("f", "results", "Fixes"),
        Binding("r", "probe", "Run probes", show=False),
        Binding("t", "trace", "Trace", show=False),
        Binding("o", "add_evidence", "Load"),
        Binding("e", "export", "Save"),
    ]

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller
        self.editing: str | None = None  # fact whose earlier answer is being changed
        self.view = "ranking"
        self.prompt: Prompt | None = None

    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield QuestionPanel(id="question")
                yield HistoryList(id="history")
            with Vertical(id="right"):
                yield RankingList(id="ranking")
                yield WhyPanel(id="why")
        yield ClaimsPanel(id="claims")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.controller.localise(self)
        self._fit(self.app.size.width, self.app.size.height)
        self.set_class(True, f"view-{self.view}")
        self.update("start")
        self.query_one(QuestionPanel).focus_answer()

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        self.set_class(width < ROOMY_WIDTH or height < ROOMY_HEIGHT, "-compact")

    # -- rendering the diagnosis ------------------------------------------------------------
    def update(self, reason: str) -> None:
        session = self.controller.session
        diagnosis = session.current
        self.query_one(SummaryBar).show(diagnosis, len(session.answers))
        ranking = self.query_one(RankingList)
        ranking.show(diagnosis)
        self._show_why(ranking.selected_cause)
        self.query_one(ClaimsPanel).show(diagnosis.claims)
        self.query_one(HistoryList).show(session.history_order(), diagnosis.facts)
        if self.editing is not None:
            self.prompt = session.edit_prompt(self.editing)
        else:
            self.prompt = session.next_prompt()
        settled = t("Settled on {cause}", cause=diagnosis.causes[0].id) if diagnosis.done else None
        panel = self.query_one(QuestionPanel)
        panel.show(self.prompt, settled=settled)
        # Keep the keyboard on the question (its choices or its typing box), unless the user
        # is browsing another panel.
        if self.focused is None or panel.has_focus_within:
            panel.focus_answer()
        self.post_message(DiagnosisUpdated(diagnosis, reason))

    def _show_why(self, cause_id: str | None) -> None:
        diagnosis = self.controller.session.current
        cause = next((c for c in diagnosis.causes if c.id == cause_id), diagnosis.causes[0])
        self.query_one(WhyPanel).show(cause)

    # -- messages from the widgets ----------------------------------------------------------
    @on(AnswerChosen)
    def _answered(self, event: AnswerChosen) -> None:
        event.stop()
        editing, self.editing = self.editing, None
        problem = self.controller.answer(event.fact, event.value)  # re-renders this screen
        if problem is not None:
            self.editing = editing
            self.query_one(QuestionPanel).show_error(problem)

    @on(QuestionSkipped)
    def _skipped(self, event: QuestionSkipped) -> None:
        event.stop()
        self.editing = None
        self.controller.skip(event.fact, event.step)  # re-renders this screen

    @on(EditAnswer)
    def _edit(self, event: EditAnswer) -> None:
        self.edit(event.fact)

    def edit(self, fact_id: str) -> None:
        """Show the question of ``fact_id`` again, its earlier answer marked, to change it."""
        session = self.controller.session
        fact = next((f for f in session.current.facts if f.fact == fact_id), None)
        if fact is not None and fact.source not in ("answer",):
            self.notify(
                t(
                    "{fact} comes from {source} ({where}); a measured or scanned value wins "
                    "over an answer.",
                    fact=fact_id,
                    source=t(fact.source),
                    where=fact.where or t("no location"),
                ),
                severity="warning",
            )
            return
        self.editing = fact_id
        self.update(f"editing {fact_id}")
        self.query_one(QuestionPanel).focus_answer()

    @on(CauseHighlighted)
    def _highlighted(self, event: CauseHighlighted) -> None:
        self._show_why(event.cause_id)

    @on(RankingList.OptionSelected, "#ranking")
    def _cause_opened(self, event: RankingList.OptionSelected) -> None:
        event.stop()
        self.post_message(ResultsWanted(cause=event.option_id))

    @on(RunAsked)
    def _run_asked(self, event: RunAsked) -> None:
        event.stop()
        if event.kind == "probe":
            self.post_message(ProbesWanted((event.probe,) if event.probe else ()))
        else:
            self.action_trace()

    # -- key actions ------------------------------------------------------------------------
    def action_choose(self, number: int) -> None:
        if not self.query_one(QuestionPanel).choose(number):
            self.app.bell()

    def action_dont_know(self) -> None:
        self.query_one(QuestionPanel).dont_know()

    def action_skip(self) -> None:
        if self.editing is not None:
            self.editing = None
            self.update("edit cancelled")
        elif self.prompt is not None:
            self.post_message(QuestionSkipped(self.prompt.fact, step_of(self.prompt)))

    def action_back(self) -> None:
        """Step back through earlier answers, newest first, to change one."""
        order = self.controller.session.history_order()
        if not order:
            self.notify(t("No answer to go back to yet."))
            return
        if self.editing in order:
            index = max(0, order.index(self.editing) - 1)
        else:
            index = len(order) - 1
        # At once, not by a message: a second b pressed before a message was handled would
        # otherwise go back to the same answer again.
        self.edit(order[index])

    def action_cycle_view(self) -> None:
        self.set_class(False, f"view-{self.view}")
        self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]
        self.set_class(True, f"view-{self.view}")
        if self.has_class("-compact"):
            self.notify(t("Showing {view}", view=t(self.view)), timeout=1.5)

    def action_results(self) -> None:
        self.post_message(ResultsWanted(cause=self.query_one(RankingList).selected_cause))

    def action_probe(self) -> None:
        if self.prompt is not None and self.prompt.how == "probe" and self.prompt.probe:
            self.post_message(ProbesWanted((self.prompt.probe,)))
        else:
            self.post_message(ProbesWanted())

    def action_trace(self) -> None:
        self.post_message(TraceWanted())

    def action_add_evidence(self) -> None:
        self.post_message(EvidenceWanted())

    def action_export(self) -> None:
        self.post_message(ExportWanted())
