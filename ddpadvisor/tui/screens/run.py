"""A probe or trace run in a worker: progress, cancel, then the per-rank results."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer
from textual.worker import Worker

from ddpadvisor.tui.controller import Controller
from ddpadvisor.tui.messages import RunEnded, RunFinished, RunProgressed, RunStarted
from ddpadvisor.tui.runners import Runner, RunOutcome, RunProgress, RunRequest
from ddpadvisor.tui.widgets.run_panel import RunPanel


class RunScreen(ModalScreen[RunOutcome | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel_or_close", "Cancel/close")]

    def __init__(self, controller: Controller, request: RunRequest, runner: Runner) -> None:
        super().__init__()
        self.controller = controller
        self.request = request
        self.runner = runner
        self.running = False
        self.outcome: RunOutcome | None = None
        self.worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        yield RunPanel(self.request, id="run-panel", classes="panel dialog")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.controller.localise(self)
        self.running = True
        self.post_message(RunStarted(self.request))
        self.worker = self.execute()

    @work(exclusive=True, group="run")
    async def execute(self) -> None:
        """Runs on the event loop: the runner awaits its subprocess, so the UI stays live, and
        cancelling the worker raises CancelledError inside the runner, which kills the run."""

        def progress(step: RunProgress) -> None:
            self.post_message(RunProgressed(step))

        try:
            outcome = await self.runner(self.request, self.controller.session.engine.kb, progress)
        except asyncio.CancelledError:
            self.post_message(RunEnded(self.request, cancelled=True))
            raise
        except Exception as exc:  # a runner bug must not take the session down
            self.post_message(RunEnded(self.request, cancelled=False, error=str(exc)))
            return
        self.post_message(RunFinished(self.request, outcome))

    @on(RunProgressed)
    def _progressed(self, event: RunProgressed) -> None:
        self.query_one(RunPanel).progress(event.progress)

    @on(RunFinished)
    def _finished(self, event: RunFinished) -> None:
        self.running = False
        self.outcome = event.outcome
        self.query_one(RunPanel).finished(event.outcome)
        # not stopped: the app, above this screen, adds the outcome to the session

    @on(RunEnded)
    def _ended(self, event: RunEnded) -> None:
        self.running = False
        self.query_one(RunPanel).ended(event.cancelled, event.error)

    def action_cancel_or_close(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "run")
            return
        self.dismiss(self.outcome)
