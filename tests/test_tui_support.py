"""Shared pieces of the TUI tests: a frozen KB, fake runners, a trace folder, a simulated user.

No tests here; pytest imports it as a module next to the TUI tests.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.kb.load import load_kb
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.observation import Gathered, Observation
from ddpadvisor.tui.runners import ProgressFn, RankRow, RunOutcome, RunProgress, RunRequest
from ddpadvisor.tui.screens.run import RunScreen
from ddpadvisor.tui.session import Session, format_value, step_of

FIXTURE_KB = Path(__file__).resolve().parent / "snapshots" / "kb"
REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


async def run_settled(pilot: Any, *, rounds: int = 1000) -> RunScreen:
    """Wait, on conditions rather than on time, until the run screen has shown its outcome.

    ``pilot.pause()`` alone waits until the CPU looks idle, which a loaded CI machine can
    report before the run's worker has even been created; a snapshot taken then shows the
    indeterminate progress bar, and ``workers.wait_for_complete()`` has nothing to wait on."""
    screen: RunScreen | None = None
    for _ in range(rounds):
        current = pilot.app.screen
        if isinstance(current, RunScreen) and current.worker is not None:
            screen = current
            break
        await pilot.pause()
    if screen is None or screen.worker is None:
        raise AssertionError("no run screen with a worker appeared")
    await screen.worker.wait()
    for _ in range(rounds):
        await pilot.pause()
        if not screen.running:
            # The outcome also re-rendered the screens under the modal (the diagnosis bar).
            # Those repaint on their own update timer, which pause() does not flush (it
            # flushes the top screen only): flush them too, as pause() does, rather than
            # hoping the timer fired before the snapshot.
            for below in pilot.app._background_screens:
                below._on_timer_update()
            await pilot.pause()
            return screen
    raise AssertionError("the run's worker ended but the screen never showed its outcome")


def fixture_engine() -> Engine:
    kb = load_kb([FIXTURE_KB])
    kb.raise_first_problem()
    return Engine(kb)


@dataclass
class FakeRunner:
    """Emits ``steps`` progress reports, yielding to the event loop between them, then returns
    canned observations. With ``hold`` set it waits on that event after the first report, so a
    test can cancel it mid-run."""

    observations: list[Observation]
    rows: list[RankRow] = field(default_factory=list)
    steps: int = 3
    hold: asyncio.Event | None = None
    calls: list[RunRequest] = field(default_factory=list)
    cancelled: bool = False

    async def __call__(
        self, request: RunRequest, kb: KnowledgeBase, progress: ProgressFn
    ) -> RunOutcome:
        self.calls.append(request)
        try:
            for i in range(1, self.steps + 1):
                progress(RunProgress(i, self.steps, f"{request.kind} step {i} of {self.steps}"))
                await asyncio.sleep(0)
                if self.hold is not None:
                    await self.hold.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return RunOutcome(
            Gathered(list(self.observations)),
            rows=list(self.rows),
            out_dir=None,
            message=f"{request.kind} finished (exit 0)",
        )


def probe_runner() -> FakeRunner:
    return FakeRunner(
        observations=[
            Observation(
                fact="sampler_shards_overlap",
                value=True,
                source="probe",
                where="ranks 0,1",
                detail="ranks 0 and 1 share 512 of 512 indices",
            )
        ],
        rows=[
            RankRow("0", "sampler.shard_size", "512"),
            RankRow("1", "sampler.shard_size", "512"),
            RankRow("0", "sampler.disjoint_ok", "false", False),
            RankRow("1", "sampler.disjoint_ok", "false", False),
        ],
    )


def write_trace(folder: Path, steps: int = 40) -> Path:
    """A small two-rank trace in the adapter's layout: rank 1 drifts away from rank 0."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        lines = []
        for step in range(steps):
            loss = 2.0 - 0.03 * step + (0.02 * step * rank if step > 20 else 0.0)
            record: dict[str, Any] = {
                "rank": rank,
                "step": step,
                "loss": round(loss, 4),
                "grad_norm": round(1.0 + 0.1 * rank * (step % 5), 4),
                "scale": 65536.0 / (2 ** (step // 15)),
            }
            lines.append(json.dumps(record))
        (folder / f"rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


# -- simulated user -------------------------------------------------------------------------------


@dataclass
class Walk:
    """What a truthful simulated user went through: the questions asked, the top after each."""

    asked: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    tops: list[str] = field(default_factory=list)  # tops[k]: the top cause after k questions
    done_after: int | None = None  # questions until the engine called the ranking settled

    def unanswered_run(self) -> int:
        run = 0
        for fact in reversed(self.asked):
            if fact in self.answered:
                break
            run += 1
        return run

    def answered_within(self, questions: int) -> int:
        return sum(fact in self.answered for fact in self.asked[:questions])

    def settled_after(self) -> int:
        """The fewest questions after which the top cause is the final one and stays so."""
        final = self.tops[-1]
        k = len(self.tops) - 1
        while k > 0 and self.tops[k - 1] == final:
            k -= 1
        return k


def truth_from_answers(engine: Engine, path: Path) -> dict[str, Any]:
    """The facts an answers file states, typed (what the simulated user knows)."""
    from ddpadvisor.evidence.answers import read_answers

    observations, _ = read_answers(engine.kb, path)
    return {o.fact: o.value for o in observations}


PATIENCE = 10  # the simulated user gives up after this many questions in a row they cannot answer


def simulate(session: Session, truth: dict[str, Any], *, limit: int = 60) -> Walk:
    """Answer every question the session asks: truthfully when known, "don't know" otherwise;
    skip probes (nothing is measured). Stops when the engine settles, nothing is left to ask,
    or the user has had PATIENCE questions in a row they could not answer."""
    walk = Walk(tops=[session.current.causes[0].id])
    for _ in range(limit):
        if walk.unanswered_run() >= PATIENCE:
            break
        prompt = session.next_prompt()
        if prompt is None:
            break
        walk.asked.append(prompt.fact)
        if prompt.how != "ask":
            session.skip(prompt.fact, step_of(prompt))  # "not now", as the TUI's key does
        elif prompt.fact in truth:
            session.answer(prompt.fact, format_value(truth[prompt.fact]))
            walk.answered.append(prompt.fact)
        else:
            session.answer(prompt.fact, None)
        walk.tops.append(session.current.causes[0].id)
        if session.current.done and walk.done_after is None:
            walk.done_after = len(walk.asked)
            break
    return walk


async def read_description(pilot: Any) -> None:
    """Press ctrl+r in the describe dialog and wait, on the worker rather than on time, until
    what it read is listed."""
    await pilot.press("ctrl+r")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
