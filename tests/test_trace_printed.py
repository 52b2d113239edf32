"""What rank 0 printed, against the losses the ranks' backwards saw: the printed numbers as the
agent keeps them (hooks/output.py, no text) and the reader's matching (evidence/trace/printed.py),
on hand-written records (no torch, no launch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.trace import printed, read_trace
from ddpadvisor.tracing.agent.ddpadvisor_trace_agent.hooks import output

# Two ranks, 8 steps of two micro-batches each; rank 1's losses stand 0.5 above rank 0's.
STEPS = 8


def _losses(rank: int, s: int) -> list[float]:
    return [2.0 - 0.1 * s + 0.5 * rank, 2.05 - 0.1 * s + 0.5 * rank]


def _trace(
    tmp_path: Path, shown: str, fac: float = 1.0, engine: bool = False, scale: float = 1.0
) -> Path:
    """Rank 0 prints, after every second step, the mean of the last two steps' losses as
    ``shown`` says: its own, the mean over ranks, their sum, or as passed to backward.
    ``engine``: a DeepSpeed engine's records (the user's loss, the engine's division as
    ``fac``). ``scale`` multiplies what is printed."""
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"},
            {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]},
        ]
        for s in range(1, STEPS + 1):
            raw = _losses(rank, s)
            step = {"k": "step", "s": s, "loss": [v * (1 if engine else fac) for v in raw],
                    "fac": [fac, fac], "syn": [False, True], "lr": [0.1], "sch": 0}  # fmt: skip
            if engine:
                step["ds"] = {"steps": 2, "bwd": 2, "bnd": [False, True]}
            recs.append(step)
            if rank == 0 and s % 2 == 0:
                window = [v for k in (s - 1, s) for v in _losses(0, k)]
                other = [v for k in (s - 1, s) for v in _losses(1, k)]
                own, mine = sum(window) / 4, sum(other) / 4
                value = {
                    "own": own,
                    "mean": (own + mine) / 2,
                    "sum": own + mine,
                    "divided": _losses(0, s)[1] * fac,
                }[shown]
                shown_value = round(value * scale, 6)
                recs.append({"k": "out", "s": s, "b": 0, "n": [[0.1, 1], [shown_value, 6]]})
        recs.append({"k": "end", "why": "exit", "s": STEPS, "fwd": 16, "bwd": 16, "sched": 0,
                     "opt_steps": [STEPS]})  # fmt: skip
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def _facts(kb: Any, folder: Path) -> dict[str, Any]:
    return {o.fact: o.value for o in read_trace(kb, folder).observations}


@pytest.mark.parametrize(
    ("shown", "fac", "rank0_only", "wrong"),
    [
        ("mean", 1.0, False, None),
        ("own", 1.0, True, None),
        ("sum", 1.0, None, True),
        ("divided", 0.5, None, True),
    ],
)
def test_which_loss_rank0_printed(tmp_path, kb, shown, fac, rank0_only, wrong):  # type: ignore[no-untyped-def]
    facts = _facts(kb, _trace(tmp_path, shown, fac))
    assert facts.get("logs_rank0_only") is rank0_only
    assert facts.get("logged_loss_reduction_wrong") is wrong
    assert facts.get("logged_loss_off_by_factor") is wrong


@pytest.mark.parametrize(
    ("shown", "rank0_only", "wrong"), [("mean", False, None), ("sum", None, True)]
)
def test_a_deepspeed_engine_records_the_users_loss(tmp_path, kb, shown, rank0_only, wrong):  # type: ignore[no-untyped-def]
    """The engine divides by its accumulation steps itself: its factor is not undone again."""
    facts = _facts(kb, _trace(tmp_path, shown, fac=0.5, engine=True))
    assert facts.get("logs_rank0_only") is rank0_only
    assert facts.get("logged_loss_reduction_wrong") is wrong


def test_a_token_count_divisor_is_part_of_the_printed_loss(tmp_path, kb):  # type: ignore[no-untyped-def]
    """A loss divided by a token count (a factor that is not 1/accumulation) prints as is."""
    facts = _facts(kb, _trace(tmp_path, "mean", fac=0.01, scale=0.01))
    assert facts.get("logs_rank0_only") is False
    assert "logged_loss_reduction_wrong" not in facts


def test_prints_that_match_no_loss_decide_nothing(tmp_path, kb):  # type: ignore[no-untyped-def]
    folder = _trace(tmp_path, "mean")
    path = folder / "rank0.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    for r in recs:
        if r["k"] == "out":
            r["n"] = [[123.4567, 4]]  # a throughput figure, say
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    facts = _facts(kb, folder)
    assert "logged_loss_reduction_wrong" not in facts
    # nothing printed decided it, and no loss read or reduction was recorded either
    assert "logs_rank0_only" not in facts


class _Window:
    def __init__(self) -> None:
        self.backwards = [object()]


class _Agent:
    def __init__(self) -> None:
        self.step, self.out_lines = 3, 0
        self.records: list[dict[str, Any]] = []
        self.window = _Window()

    def record(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("epoch 2 step 40: loss 1.2345, lr 3e-4", [[1.2345, 4], [3e-4, -1]]),
        ("iter 12/100 loss=.51 acc 97.", [[0.51, 2], [97.0, 0]]),
        ("epoch 3 of 10", None),  # counters alone: nothing kept
        ("v1.2.3 loaded from run-0.5x", None),  # versions and names are not numbers
    ],
)
def test_the_agent_keeps_numbers_not_text(text, numbers):  # type: ignore[no-untyped-def]
    a = _Agent()
    output._numbers(a, text)  # type: ignore[arg-type]
    if numbers is None:
        assert a.records == []
    else:
        assert a.records == [{"k": "out", "s": 3, "b": 1, "n": numbers}]


def test_a_loss_divided_by_the_world_size_prints_undivided(tmp_path, kb):  # type: ignore[no-untyped-def]
    """``(loss / world).backward()`` with the mean over ranks of ``loss`` printed: that mean
    equals the sum of what reached backward, and must not read as a summed reduction."""
    folder = tmp_path / "trace"
    folder.mkdir()
    raw = {r: [2.0 - 0.1 * s + 0.5 * r for s in range(1, STEPS + 1)] for r in (0, 1)}
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"},
            {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]},
        ]
        for s in range(1, STEPS + 1):
            recs.append({"k": "step", "s": s, "loss": [raw[rank][s - 1] / 2], "fac": [0.5],
                         "syn": [True], "lr": [0.1], "sch": 0})  # fmt: skip
            if rank == 0:
                mean = (raw[0][s - 1] + raw[1][s - 1]) / 2
                recs.append({"k": "out", "s": s, "b": 0, "n": [[round(mean, 4), 4]]})
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    facts = _facts(kb, folder)
    assert facts.get("logs_rank0_only") is False
    assert "logged_loss_reduction_wrong" not in facts
    assert facts.get("loss_divided_by_world_size") is True


def test_a_print_reads_as_the_reading_it_fits_best() -> None:
    """3.3515 printed to 4 decimals: rank 0's own step mean (3.35150) fits it exactly; the
    mean over ranks of the last micro-batch (3.35313) lies inside the loose tolerance kept for
    float32 sums and bf16 losses, but not within the printed precision of the best fit."""
    kinds = [("own", [("step", 3.35150)]), ("mean", [("last", 3.35313)]), ("sum", [])]
    assert set(printed._nearest(3.3515, 4, kinds)) == {"own"}
    # two readings the print cannot tell apart both stay
    kinds = [("own", [("step", 3.35150)]), ("mean", [("last", 3.35153)])]
    assert set(printed._nearest(3.3515, 4, kinds)) == {"own", "mean"}
    assert printed._nearest(9.0, 4, kinds) == {}


@pytest.mark.parametrize(
    ("own", "mean", "rank0_only"),
    [(5, 1, True), (11, 1, True), (1, 6, False), (3, 2, None), (1, 0, None), (0, 2, False)],
)
def test_a_chance_fit_does_not_cancel_a_whole_log(own, mean, rank0_only) -> None:  # type: ignore[no-untyped-def]
    p = printed.PrintedLoss(prints=own + mean, own=own, mean=mean)
    assert printed.verdict(p)["logs_rank0_only"] is rank0_only


def test_micro_batch_shares_of_a_token_mean_print_as_their_total(tmp_path, kb):  # type: ignore[no-untyped-def]
    """Each micro-batch's summed token loss divided by the window's tokens on all ranks over
    the world size (a count that changes every step): a step's loss is the total of its two
    micro-batch values, and the loop prints the mean over ranks of that total. With two
    ranks and two micro-batches it equals the ranks' sum of the micro-batch mean: not a
    summed log."""
    folder = tmp_path / "trace"
    folder.mkdir()
    vals = {r: {s: [0.9 + 0.05 * s + 0.1 * r, 1.1 - 0.02 * s + 0.07 * r] for s in range(1, 9)}
            for r in (0, 1)}  # fmt: skip
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"},
            {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]},
        ]
        for s in range(1, 9):
            fac = 2 / (600 + 10 * s)
            recs.append({"k": "step", "s": s, "loss": vals[rank][s], "fac": [fac, fac],
                         "syn": [False, True], "lr": [0.1], "sch": 0})  # fmt: skip
            if rank == 0 and s % 2 == 0:
                totals = [sum(vals[r][k]) for r in (0, 1) for k in (s - 1, s)]
                recs.append({"k": "out", "s": s, "b": 0, "n": [[round(sum(totals) / 4, 4), 4]]})
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    facts = _facts(kb, folder)
    assert facts.get("logs_rank0_only") is False
    assert "logged_loss_reduction_wrong" not in facts
