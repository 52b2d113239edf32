"""The ddpadvisor TUI: ``run_tui(args)`` for the CLI, ``create_app(...)`` for tests.

The app owns one :class:`Session` and the injected probe/trace runners. It is the screens'
:class:`~ddpadvisor.tui.controller.Controller`: each screen gets it in its constructor, reads
the session's current :class:`Diagnosis` through it and asks it to change the evidence (only the
app changes the session); screens open other screens by posting the navigation messages of
:mod:`ddpadvisor.tui.messages`, handled here. No screen or widget imports this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import App
from textual.binding import Binding, BindingsMap, BindingType
from textual.dom import DOMNode

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.errors import InputError
from ddpadvisor.evidence.intake import Finding
from ddpadvisor.i18n import Lang, set_current, t
from ddpadvisor.kb.resemblance import Resemblance
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.observation import Gathered
from ddpadvisor.report.models import FixOut
from ddpadvisor.tui.messages import (
    DiagnosisUpdated,
    EvidenceLoaded,
    EvidenceWanted,
    ExportWanted,
    FixChosen,
    ProbesWanted,
    ResultsWanted,
    RunFinished,
    TraceWanted,
    VerifyReported,
)
from ddpadvisor.tui.runners import Runner, RunOutcome, RunRequest, SubprocessRunner
from ddpadvisor.tui.screens.describe import DescribeScreen
from ddpadvisor.tui.screens.diagnose import DiagnoseScreen
from ddpadvisor.tui.screens.evidence import EvidenceResult, EvidenceScreen
from ddpadvisor.tui.screens.export import ExportScreen
from ddpadvisor.tui.screens.fix import FixScreen
from ddpadvisor.tui.screens.results import ResultsScreen
from ddpadvisor.tui.screens.run import RunScreen
from ddpadvisor.tui.session import Session


class DDPAdvisorApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "ddpadvisor"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "toggle_keys", "Keys", key_display="?"),
        Binding("f2", "toggle_theme", "Light/dark", show=False),
        # Labelled with the language it switches to. The footer is full at 80 columns, so the
        # key is announced on the start dialog (and listed under ?) instead.
        Binding("l", "toggle_lang", "中文", show=False),
    ]

    def __init__(
        self,
        session: Session,
        *,
        probe_runner: Runner,
        trace_runner: Runner,
        show_start: bool = True,
        nproc: int = 2,
        describe_text: str = "",
    ) -> None:
        super().__init__()
        self.describe_text = describe_text
        self._session = session
        self.probe_runner = probe_runner
        self.trace_runner = trace_runner
        self.show_start = show_start
        self.nproc = nproc
        set_current(session.lang)
        self.localise(self)
        self.diagnose_screen = DiagnoseScreen(self)

    @property
    def session(self) -> Session:
        return self._session

    @property
    def lang(self) -> Lang:
        return self.session.lang

    # -- language ---------------------------------------------------------------------------
    def localise(self, node: DOMNode) -> None:
        """Give ``node``'s key bindings their description in the current language (the footer
        shows these); the English descriptions in BINDINGS stay the catalogue keys."""
        merged = type(node)._merged_bindings
        if merged is None:
            return
        node._bindings = BindingsMap.from_keys(
            {
                key: [_localised(b) for b in bindings]
                for key, bindings in merged.key_to_bindings.items()
            }
        )

    def set_lang(self, lang: Lang) -> None:
        """Speak ``lang`` from now on; every answer and loaded source stays."""
        set_current(lang)
        self.session.set_lang(lang)
        self.localise(self)
        for screen in self.screen_stack:
            self.localise(screen)
        self.changed("language")
        self.refresh_bindings()

    def action_toggle_lang(self) -> None:
        self.set_lang("en" if self.lang == "zh" else "zh")

    def on_mount(self) -> None:
        self.push_screen(self.diagnose_screen)
        if self.describe_text:
            self.open_describe(self.describe_text)  # --describe FILE: confirm what it says
        elif self.show_start:
            self.open_evidence(start=True)

    # -- evidence ---------------------------------------------------------------------------
    @on(VerifyReported)
    def _verify_reported(self, event: VerifyReported) -> None:
        self.session.verify_result(event.fix_id, event.outcome)
        self.changed(f"verify {event.outcome}")
        score = next((c.score for c in self.session.current.causes if c.id == event.cause_id), 0.0)
        self.notify(f"Verify {event.outcome}: {event.cause_id} now {score:.0%}", timeout=4)

    def changed(self, reason: str) -> None:
        """The session's evidence changed: re-render every screen that shows the diagnosis."""
        if self.diagnose_screen.is_mounted:
            self.diagnose_screen.update(reason)
        else:
            self.post_message(DiagnosisUpdated(self.session.current, reason))
        for screen in self.screen_stack:
            if isinstance(screen, ResultsScreen):
                screen.refresh_results()

    # -- the controller: the only changes to the session -------------------------------------
    def answer(self, fact: str, raw: Any) -> str | None:
        try:
            self.session.answer(fact, raw)
        except ValueProblem as problem:
            return str(problem)
        self.changed(f"answered {fact}")
        return None

    def skip(self, fact: str, step: str | None) -> None:
        self.session.skip(fact, step)
        self.changed(f"skipped {fact}")

    def describe(self, findings: list[Finding], resemblance: list[Resemblance]) -> None:
        self.session.answer_described(findings, resemblance)
        self.changed("description read")

    def load_evidence(self, kind: str, path: Path) -> str | None:
        """Load a source into the session; returns the one-line problem, or None."""
        before = len(self.session.observations())
        try:
            self.session.load(kind, path)
        except InputError as exc:
            return exc.one_line()
        count = len(self.session.observations()) - before
        self.post_message(EvidenceLoaded(kind, path, count))
        self.notify(t("Loaded {count} facts from {name}", count=count, name=path.name), timeout=3)
        self.changed(f"loaded {kind}")
        return None

    def open_evidence(self, *, start: bool) -> None:
        self.push_screen(EvidenceScreen(self, start=start), self._evidence_chosen)

    @on(EvidenceWanted)
    def _evidence_wanted(self) -> None:
        self.open_evidence(start=False)

    def _evidence_chosen(self, result: EvidenceResult | None) -> None:
        if result is None:
            return
        if result.choice == "describe":
            self.open_describe()
        elif result.choice == "run-probes":
            self.start_probes(())
        elif result.choice == "run-trace" and result.path is not None:
            self.start_trace(result.path)

    def open_describe(self, text: str = "") -> None:
        self.push_screen(DescribeScreen(self, text))

    # -- runs -------------------------------------------------------------------------------
    def start_probes(self, probes: tuple[str, ...]) -> None:
        request = RunRequest(kind="probe", probes=probes, nproc=self.nproc)
        self.push_screen(RunScreen(self, request, self.probe_runner))

    @on(ProbesWanted)
    def _probes_wanted(self, event: ProbesWanted) -> None:
        self.start_probes(event.probes)

    @on(TraceWanted)
    def _trace_wanted(self) -> None:
        self.ask_trace()

    def ask_trace(self) -> None:
        scripts = [s.path for s in self.session.sources if s.kind == "script"]
        if scripts:
            self.start_trace(scripts[-1])
        else:
            self.push_screen(EvidenceScreen(self, start=False), self._evidence_chosen)
            self.notify(t("Choose 'Trace my training script now' and give its path."), timeout=4)

    def start_trace(self, script: Path) -> None:
        request = RunRequest(kind="trace", script=script, nproc=self.nproc)
        self.push_screen(RunScreen(self, request, self.trace_runner))

    @on(RunFinished)
    def _run_finished(self, event: RunFinished) -> None:
        self.apply_outcome(event.request, event.outcome)

    def apply_outcome(self, request: RunRequest, outcome: RunOutcome) -> None:
        self.session.add_measured(outcome.gathered, request.kind, outcome.out_dir)
        self.changed(f"{request.kind} finished")

    # -- results and export -----------------------------------------------------------------
    def show_results(self, tab: str = "causes", cause: str | None = None) -> None:
        self.push_screen(ResultsScreen(self, tab, cause=cause))

    @on(ResultsWanted)
    def _results_wanted(self, event: ResultsWanted) -> None:
        self.show_results(event.tab, event.cause)

    def open_fix(self, cause_id: str, fix: FixOut) -> None:
        self.push_screen(FixScreen(self, cause_id, fix))

    @on(FixChosen)
    def _fix_chosen(self, event: FixChosen) -> None:
        self.open_fix(event.cause.id, event.fix)

    def open_export(self) -> None:
        self.push_screen(ExportScreen(self))

    @on(ExportWanted)
    def _export_wanted(self) -> None:
        self.open_export()

    def export(self, path: Path, fmt: str) -> str | None:
        try:
            self.session.export(path, fmt)
        except InputError as exc:
            return exc.one_line()
        return None

    # -- app keys ---------------------------------------------------------------------------
    def action_toggle_keys(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"


def _localised(binding: Binding) -> Binding:
    return dataclasses.replace(binding, description=t(binding.description))


def create_app(
    engine: Engine | None = None,
    *,
    session: Session | None = None,
    probe_runner: Runner | None = None,
    trace_runner: Runner | None = None,
    show_start: bool = True,
    gpu_available: bool | None = None,
    nproc: int = 2,
    lang: Lang | None = None,
    describe_text: str = "",
) -> DDPAdvisorApp:
    """Build the app; tests pass their own engine, session and fake runners. ``lang`` (when
    given) overrides the session's language."""
    if session is None:
        if engine is None:
            from ddpadvisor.service import load_engine

            engine = load_engine([])
        session = Session(engine, gpu_available=gpu_available, lang=lang or "en")
    elif lang is not None and lang != session.lang:
        session.set_lang(lang)
    runner = SubprocessRunner()
    return DDPAdvisorApp(
        session,
        probe_runner=probe_runner or runner,
        trace_runner=trace_runner or runner,
        show_start=show_start,
        nproc=nproc,
        describe_text=describe_text,
    )


def session_from_args(args: argparse.Namespace) -> Session:
    """Load every source named on the command line; raises InputError before the UI starts."""
    from ddpadvisor.evidence.answers import parse_set
    from ddpadvisor.i18n import detect
    from ddpadvisor.service import load_engine

    engine = load_engine(args.kb_dirs)
    gpu = {"yes": True, "no": False}.get(getattr(args, "gpu", "unknown"))
    session = Session(engine, gpu_available=gpu, lang=detect(getattr(args, "lang", None)))
    for path in args.answers:
        session.load("answers", path)
    if args.sets:
        session.add_gathered(Gathered(parse_set(engine.kb, args.sets)), "set", None)
    for path in args.scripts:
        session.load("script", path)
    # the registry's order: the run's own files, then the good run's log compared with them
    for value in getattr(args, "attach", []):
        session.attach(value)
    for value in getattr(args, "reference_logs", []):
        session.attach(value, reference=True)
    for kind, paths in (("probe", args.probe_results), ("trace", args.traces)):
        for path in paths:
            session.load(kind, path)
    return session


def run_tui(args: argparse.Namespace) -> int:
    from ddpadvisor.evidence.intake import read_text

    if sys.stderr.isatty():  # the knowledge base takes seconds to load on a cold cache
        from ddpadvisor.i18n import detect

        lang = detect(getattr(args, "lang", None))
        print(t("Loading the knowledge base…", lang), file=sys.stderr, flush=True)
    session = session_from_args(args)
    has_sources = bool(session.observations() or session.sources)
    text = "\n\n".join(read_text(p) for p in getattr(args, "describe", []))
    app = create_app(session=session, show_start=not has_sources, describe_text=text)
    app.run()
    return app.return_code or 0
