"""The TUI's headless run helpers: subprocess runner (progress, exit codes, cancellation that
leaves no process behind), the per-rank table readers and the trace series adapter."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_tui_support import fixture_engine, run_settled, write_trace

from ddpadvisor.tui.runners import (
    RunProgress,
    RunRequest,
    SubprocessRunner,
    command_for,
    default_out_dir,
    probe_rows,
    trace_rows,
)
from ddpadvisor.tui.trace_series import read_series

# -- trace series ---------------------------------------------------------------------------------


def test_series_from_agent_records(tmp_path: Path) -> None:
    """The trace agent's layout: kind/step keys, a loss per micro-batch, check records."""
    records = [
        {"k": "cfg", "rank": 1},
        {"k": "step", "s": 1, "loss": [2.0, 4.0], "pre": 1.5, "post": 1.25, "scale": 65536.0},
        {"k": "chk", "s": 1, "params": "abc"},
        {"k": "step", "s": 2, "loss": [1.0], "pre": 2.0, "scale": 32768.0},
        {"k": "step", "s": 3, "loss": ["nan-as-text"], "post": None, "pre": 0.5},
    ]
    lines = [json.dumps(r) for r in records] + ["{not json"]
    (tmp_path / "rank1.jsonl").write_text("\n".join(lines) + "\n")
    series = read_series(tmp_path)
    assert series.ranks() == [1]
    assert series.series["loss"][1] == [(1, 3.0), (2, 1.0)]
    assert series.series["grad_norm"][1] == [(1, 1.25), (2, 2.0), (3, 0.5)]
    assert series.series["scale"][1] == [(1, 65536.0), (2, 32768.0)]
    assert series.skipped_lines == 1


def test_series_from_plain_records(tmp_path: Path) -> None:
    folder = write_trace(tmp_path / "t", steps=5)
    nested = {"rank": 2, "step": 0, "metrics": {"loss": 9.0}}
    (folder / "extra.jsonl").write_text(json.dumps(nested) + "\n")
    series = read_series(folder)
    assert series.ranks() == [0, 1, 2]
    assert series.steps(0) == 5
    assert series.series["loss"][2] == [(0, 9.0)]
    assert series.has("scale") and not read_series(tmp_path / "missing").ranks()


def test_trace_rows_summarise_each_rank(tmp_path: Path) -> None:
    rows = trace_rows(write_trace(tmp_path / "t", steps=7))
    assert {(r.rank, r.item, r.value) for r in rows if r.item == "steps recorded"} == {
        ("0", "steps recorded", "7"),
        ("1", "steps recorded", "7"),
    }
    assert any(r.item == "last scale" for r in rows)


# -- probe result table ---------------------------------------------------------------------------


def test_probe_rows_one_line_per_rank_and_probe(tmp_path: Path) -> None:
    """The layout of `ddpadvisor probe --out`: <probe>/rank<R>.json with status and summary."""
    for rank, status in ((0, "ok"), (1, "failed")):
        folder = tmp_path / "sampler"
        folder.mkdir(exist_ok=True)
        record = {"probe": "sampler", "rank": rank, "status": status, "summary": f"r{rank}"}
        (folder / f"rank{rank}.json").write_text(json.dumps(record))
    (tmp_path / "run.json").write_text(json.dumps({"probes": ["sampler"], "world_size": 2}))
    rows = probe_rows(tmp_path)
    assert [(r.rank, r.item, r.value, r.ok) for r in rows] == [
        ("0", "sampler", "r0", True),
        ("1", "sampler", "r1", False),
    ]


def test_probe_rows_read_any_per_rank_json(tmp_path: Path) -> None:
    (tmp_path / "sampler").mkdir()
    (tmp_path / "sampler" / "rank0.json").write_text(
        json.dumps({"rank": 0, "world_size": 2, "overlap": {"indices_match": False, "n": 12}})
    )
    (tmp_path / "sampler" / "rank1.json").write_text(json.dumps({"ok": True, "note": "fine"}))
    (tmp_path / "broken.json").write_text("{")
    rows = {(r.rank, r.item): r for r in probe_rows(tmp_path)}
    assert rows[("0", "overlap.indices_match")].ok is False
    assert rows[("0", "overlap.n")].value == "12" and rows[("0", "overlap.n")].ok is None
    assert rows[("1", "ok")].ok is True
    assert ("0", "world_size") not in rows
    assert probe_rows(None) == [] and probe_rows(tmp_path / "missing") == []


def test_commands_match_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "o"
    probe = command_for(RunRequest("probe", probes=("env", "seeds"), nproc=4), out)
    assert probe[1:] == [
        "-m",
        "ddpadvisor",
        "probe",
        "env",
        "seeds",
        "--nproc",
        "4",
        "--backend",
        "auto",
        "--timeout",
        "300",
        "--out",
        str(out),
    ]
    script = tmp_path / "train.py"
    trace = command_for(RunRequest("trace", script=script, script_args=("--lr", "1")), out)
    expected = ["trace", "--nproc", "2", "--out", str(out), "--", str(script), "--lr", "1"]
    assert trace[3:] == expected
    first = default_out_dir("probe", tmp_path)
    first.mkdir(parents=True)
    assert default_out_dir("probe", tmp_path) != first


# -- the subprocess runner ------------------------------------------------------------------------


def stand_in(code: str):  # type: ignore[no-untyped-def]
    """A make_command that runs ``code`` instead of ddpadvisor."""

    def make(request: RunRequest, out_dir: Path) -> list[str]:
        return [sys.executable, "-c", textwrap.dedent(code), str(out_dir)]

    return make


def test_runner_reports_progress_and_exit_code(tmp_path: Path) -> None:
    kb = fixture_engine().kb
    seen: list[RunProgress] = []
    ok = SubprocessRunner(
        make_command=stand_in(
            """
            print("ddpadvisor probe: env, seeds on 2 rank(s)", flush=True)
            for name in ("env", "seeds"):
                print(f"  {name:<10} 0.03 s  fine", flush=True)
            """
        )
    )
    request = RunRequest("probe", probes=("env", "seeds"), out_dir=tmp_path / "a")
    outcome = asyncio.run(ok(request, kb, seen.append))
    assert [s.done for s in seen] == [0, 0, 1, 2] and seen[-1].total == 2
    assert not outcome.failed and outcome.message == "probe finished (exit 0)"

    bad = SubprocessRunner(make_command=stand_in("import sys; print('rank 1 hung'); sys.exit(3)"))
    outcome = asyncio.run(bad(RunRequest("probe", out_dir=tmp_path / "b"), kb, seen.append))
    assert outcome.failed and outcome.message.endswith("rank 1 hung")
    assert outcome.gathered.failed


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its entry is left


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to inspect processes")
def test_cancel_kills_the_whole_process_group(tmp_path: Path) -> None:
    """Cancelling the awaiting task ends the launcher and the workers it started, even one in
    its own session that ignores SIGTERM, within 5 s."""
    runner = SubprocessRunner(
        grace_s=2.0,
        make_command=stand_in(
            """
            import os, subprocess, sys, time
            # Like a torchrun rank: a session of its own, and deaf to SIGTERM.
            code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            code += "print(flush=True); time.sleep(60)"
            worker = subprocess.Popen(
                [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE
            )
            worker.stdout.readline()  # its SIGTERM handler is in place
            print(os.getpid(), worker.pid, flush=True)
            time.sleep(60)
            """
        ),
    )
    pids: list[int] = []

    async def go() -> None:
        started = asyncio.Event()

        def progress(step: RunProgress) -> None:
            if step.text.split()[0].isdigit():
                pids.extend(int(p) for p in step.text.split())
                started.set()

        task = asyncio.create_task(
            runner(RunRequest("probe", out_dir=tmp_path), fixture_engine().kb, progress)
        )
        await asyncio.wait_for(started.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert len(pids) == 2
    # Signals are delivered asynchronously: allow the kernel a moment to finish the kill.
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.slow
def test_real_probe_run_from_the_tui(tmp_path: Path, engine) -> None:  # type: ignore[no-untyped-def]
    """`ddpadvisor probe` on 2 gloo ranks, started from the TUI: progress, table, evidence."""
    from textual.widgets import DataTable

    from ddpadvisor.tui.app import create_app
    from ddpadvisor.tui.messages import RunFinished, RunProgressed
    from ddpadvisor.tui.session import Session

    runner = SubprocessRunner(base_dir=tmp_path)
    app = create_app(session=Session(engine), probe_runner=runner, show_start=False)
    seen: list[object] = []

    async def go() -> None:
        async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
            await pilot.pause()
            app.start_probes(("env", "sampler"))
            await run_settled(pilot)
            finished = [m for m in seen if isinstance(m, RunFinished)]
            assert finished and not finished[0].outcome.failed, finished
            assert any(isinstance(m, RunProgressed) and m.progress.done == 2 for m in seen)
            table = app.screen.query_one("#run-table", DataTable)
            assert table.row_count == 4  # two probes on two ranks
            facts = {f.fact: f for f in app.session.current.facts}
            assert facts["torch_version"].source == "probe"

    asyncio.run(go())
    assert (tmp_path / "ddpadvisor-runs" / "probe-1" / "sampler").is_dir()


def test_plot_legend_says_when_ranks_coincide() -> None:
    from ddpadvisor.tui.widgets.rank_plot import legend

    same = [(1, 0.5), (2, 0.4)]
    assert "identical on every rank" in legend({0: same, 1: list(same)}).plain
    assert "identical" not in legend({0: same, 1: [(1, 0.5), (2, 0.9)]}).plain
