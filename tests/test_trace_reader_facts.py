"""Reader facts that need the whole picture: epochs that cover the data, duplicated batches at
any step offset, no "false" where the agent did not watch everything, and the traced script
scanned beside the trace (hand-written records; no torch, no launch)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.gather import Sources, gather
from ddpadvisor.evidence.trace import read_trace

HERE = Path(__file__).resolve().parent
REAL = HERE / "trace_fixtures" / "control_mlp"


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def _start(rank: int) -> dict[str, Any]:
    return {"k": "start", "v": 2, "rank": rank, "world": 2, "backend": "gloo"}


def _wrap() -> dict[str, Any]:
    return {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]}


def _step(s: int, dig: list[list[float]]) -> dict[str, Any]:
    return {"k": "step", "s": s, "loss": [1.0], "syn": [True], "lr": [0.1], "sch": 0, "dig": dig}


def _epoch(it: int, rank: int, s: int) -> dict[str, Any]:
    return {
        "k": "epoch",
        "it": it,
        "sampler": 0,
        "cls": "DistributedSampler",
        "dataset_len": 16,
        "bs": 2,
        "seed": 0,
        "epoch": 0,
        "shuffle": True,
        "num_replicas": 2,
        "rank": rank,
        "set_epoch_calls": [],
        "s": s,
    }


def _write(folder: Path, per_rank: dict[int, list[dict[str, Any]]]) -> Path:
    folder.mkdir(parents=True)
    for rank, recs in per_rank.items():
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _facts(kb: Any, folder: Path) -> dict[str, Any]:
    return {o.fact: o for o in read_trace(kb, folder).observations}


def test_a_one_batch_peek_is_not_an_epoch(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {}
    for r in (0, 1):
        shard = [r + 2 * i for i in range(8)]
        recs = [_start(r), _wrap()]
        # next(iter(loader)) before training: one batch, and the iteration is closed.
        recs += [_epoch(1, r, 0), {"k": "idx", "it": 1, "part": 0, "idx": shard[:2], "end": True}]
        recs += [_epoch(2, r, 0), {"k": "idx", "it": 2, "part": 0, "idx": shard, "end": True}]
        recs += [_step(s, [[float(s), float(r)]]) for s in range(1, 5)]
        recs.append({"k": "end", "s": 4})
        ranks[r] = recs
    f = _facts(kb, _write(tmp_path / "t", ranks))
    # One real epoch: nothing can say whether set_epoch is called between epochs.
    assert "calls_set_epoch" not in f
    assert "sampler_order_repeats_across_epochs" not in f
    # Two real epochs with the same value and order: set_epoch is missing.
    for r in (0, 1):
        shard = [r + 2 * i for i in range(8)]
        ranks[r] = [*ranks[r][:-1], _epoch(3, r, 4)]
        ranks[r] += [{"k": "idx", "it": 3, "part": 0, "idx": shard, "end": True}]
        ranks[r] += [_step(s, [[float(s), float(r)]]) for s in range(5, 9)]
        ranks[r].append({"k": "end", "s": 8})
    f = _facts(kb, _write(tmp_path / "t2", ranks))
    assert f["calls_set_epoch"].value is False
    assert f["sampler_order_repeats_across_epochs"].value is True


def test_a_rank_feeding_another_ranks_batch_one_step_later_is_a_duplicate(tmp_path, kb):  # type: ignore[no-untyped-def]
    batches = [[float(s), float(s) * 7] for s in range(1, 11)]
    ranks = {
        0: [_start(0), _wrap(), *[_step(s, [batches[s - 1]]) for s in range(1, 10)]],
        1: [_start(1), _wrap(), *[_step(s, [batches[s]]) for s in range(1, 10)]],
    }
    f = _facts(kb, _write(tmp_path / "t", ranks))
    dup = f["batches_duplicated_across_ranks"]
    assert dup.value is True
    assert "one rank fed it at step" in dup.detail
    ranks[1] = [_start(1), _wrap(), *[_step(s, [[-float(s), 3.0]]) for s in range(1, 10)]]
    f = _facts(kb, _write(tmp_path / "t2", ranks))
    assert f["batches_duplicated_across_ranks"].value is False


def test_a_batch_changing_hands_between_epochs_is_no_duplicate(tmp_path, kb):  # type: ignore[no-untyped-def]
    """Fixed batches (length buckets) dealt to the ranks in a new order each epoch: rank 0
    feeds in epoch 2 the batches rank 1 fed in epoch 1. Each DataLoader iterator (``iter``)
    begins an epoch where no training sampler is recorded; within one epoch a batch fed by
    both ranks is still a duplicate."""
    bucket = {i: [float(i), float(i) * 7] for i in range(8)}
    deal = {0: [0, 1, 2, 3, 4, 5, 6, 7], 1: [4, 5, 6, 7, 0, 1, 2, 3]}
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap(), {"k": "iter", "workers": 0, "s": 0}]
        for s in range(1, 9):
            if s == 5:
                recs.append({"k": "iter", "workers": 0, "s": 4})
            recs.append(_step(s, [bucket[deal[r][s - 1]]]))
        ranks[r] = recs
    f = _facts(kb, _write(tmp_path / "t", ranks))
    assert f["batches_duplicated_across_ranks"].value is False
    for r in (0, 1):  # one iterator for all eight steps: the same batches within one epoch
        ranks[r] = [rec for rec in ranks[r] if rec.get("s") != 4 or rec["k"] != "iter"]
    f = _facts(kb, _write(tmp_path / "t2", ranks))
    assert f["batches_duplicated_across_ranks"].value is True


def test_where_the_batches_came_from(tmp_path, kb):  # type: ignore[no-untyped-def]
    """A DataLoader's first fetch is recorded ("iter"); with none on any rank the batches
    came from elsewhere, and with the loader hook broken nothing is said."""
    steps = [_step(s, [[float(s), 1.0]]) for s in range(1, 5)]
    ranks = {r: [_start(r), _wrap(), *steps] for r in (0, 1)}
    f = _facts(kb, _write(tmp_path / "none", ranks))
    assert f["batches_from_dataloader"].value is False
    assert "no rank iterated a torch DataLoader in 4 steps" in f["batches_from_dataloader"].detail
    fetch = {"k": "iter", "workers": 0, "s": 0}
    ranks[1] = [_start(1), _wrap(), fetch, *steps]
    f = _facts(kb, _write(tmp_path / "one", ranks))
    assert f["batches_from_dataloader"].value is True
    broken = {"k": "agent_error", "part": "sampler", "error": "RuntimeError()", "at": "x:1"}
    ranks[1] = [_start(1), _wrap(), broken, *steps]
    f = _facts(kb, _write(tmp_path / "broken", ranks))
    assert "batches_from_dataloader" not in f
    ranks = {r: [_start(r), _wrap()] for r in (0, 1)}
    assert "batches_from_dataloader" not in _facts(kb, _write(tmp_path / "stepless", ranks))


def test_state_loaded_alike_on_every_rank_measures_no_false(tmp_path, kb):  # type: ignore[no-untyped-def]
    load = {"k": "load", "kind": "model", "cls": "Net", "after_wrap": True, "wrapped": True, "s": 0}
    ranks = {r: [_start(r), _wrap(), load, _step(1, [[1.0, float(r)]])] for r in (0, 1)}
    f = _facts(kb, _write(tmp_path / "t", ranks))
    # Only load_state_dict is watched: weights changed in place on one rank go unseen here.
    assert "rank_conditional_state_change" not in f
    ranks[1] = [_start(1), _wrap(), _step(1, [[1.0, 1.0]])]
    f = _facts(kb, _write(tmp_path / "t2", ranks))
    assert f["rank_conditional_state_change"].value is True
    assert f["weights_loaded_on_some_ranks"].value is True
    # only a GradScaler's state loaded on rank 0: the weights were loaded alike
    scaler = {**load, "kind": "scaler", "cls": "GradScaler"}
    ranks = {r: [_start(r), _wrap(), load, _step(1, [[1.0, float(r)]])] for r in (0, 1)}
    ranks[0].insert(3, scaler)
    f = _facts(kb, _write(tmp_path / "t3", ranks))
    assert f["rank_conditional_state_change"].value is True
    assert f["weights_loaded_on_some_ranks"].value is False
    assert "only scaler state differs" in f["weights_loaded_on_some_ranks"].detail


def test_json_trace_also_scans_the_traced_script_and_says_so(tmp_path, kb):  # type: ignore[no-untyped-def]
    folder = tmp_path / "trace"
    shutil.copytree(REAL, folder)
    for path in folder.glob("rank*.jsonl"):
        lines = path.read_text().splitlines()
        start = json.loads(lines[0])
        start["argv"] = ["zoo/control_mlp.py", "--epochs", "2"]
        start["cwd"] = str(HERE)
        path.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    got = gather(kb, Sources(traces=[folder]))
    sources = {o.source for o in got.observations}
    assert sources == {"trace", "script"}
    assert any(
        "also scanned the traced script" in w and "control_mlp.py" in w for w in got.warnings
    )
    # Named with --script as well: scanned once, no second note.
    got = gather(kb, Sources(traces=[folder], scripts=[HERE / "zoo" / "control_mlp.py"]))
    assert not any("also scanned" in w for w in got.warnings)
    assert not any("not the script --script names" in w for w in got.warnings)
    # --script names another file than the job ran: both are read, and the user is told
    other = HERE / "zoo" / "control_accum_nosync.py"
    got = gather(kb, Sources(traces=[folder], scripts=[other]))
    assert any("control_mlp.py, not the script --script names" in w for w in got.warnings)
    # The script is gone: the trace alone, and why.
    for path in folder.glob("rank*.jsonl"):
        path.write_text(path.read_text().replace(str(HERE), str(tmp_path / "elsewhere")))
    got = gather(kb, Sources(traces=[folder]))
    assert {o.source for o in got.observations} == {"trace"}
    assert any("the traced script was not scanned" in w for w in got.warnings)


def _scaled_run(
    skips: set[int], steps: int = 10, grows: frozenset[int] = frozenset()
) -> list[dict[str, Any]]:
    """A GradScaler job: each skipped step halves the scale, from 2**16; each step of
    ``grows`` doubles it (the growth after a run of clean steps)."""
    out: list[dict[str, Any]] = [_start(0), _wrap()]
    scale = 65536.0
    for s in range(steps):
        rec = _step(s, [[1.0, 2.0]])
        if s in skips:
            scale /= 2
            rec["finf"] = 1.0
        elif s in grows:
            scale *= 2
        rec["scale"] = [scale]
        out.append(rec)
    return out


@pytest.mark.parametrize(
    ("skips", "counted"),
    [
        ({0, 1, 2, 3}, 0),  # the scale settling at the start: healthy
        ({0, 1, 2, 6}, 1),  # settled, then one overflow later on
        (set(range(10)), 10),  # never a clean step: not calibration
        ({2, 3}, 2),  # not at the start
    ],
)
def test_the_loss_scale_settling_at_the_start_is_not_counted(tmp_path, kb, skips, counted):  # type: ignore[no-untyped-def]
    run = _scaled_run(skips)
    other = [{**r, "rank": 1} if r["k"] == "start" else r for r in run]
    facts = _facts(kb, _write(tmp_path / "t", {0: run, 1: other}))
    assert facts["nonfinite_grad_steps"].value == counted


def _clip_trace(
    stepped: list[float], reduced: float, scale: float | None = None, growth: int = 1
) -> dict[int, Any]:
    """Two ranks, no clip call recorded; checks fingerprint gradients whose squared norms
    sum to ``stepped[i]**2`` against DDP's all-reduced norm ``reduced`` at each step (with a
    GradScaler of ``scale``, the reduced gradients are scaled, the stepped ones not). A
    parameter added after wrapping (in no DDP bucket) has a gradient too."""
    ranks: dict[int, Any] = {}
    for r in (0, 1):
        recs: list[dict[str, Any]] = [_start(r), _wrap()]
        if scale is not None:
            recs.append({"k": "cfg", "scaler": True})
        for s, norm in enumerate(stepped, start=1):
            step = {**_step(s, [[float(s), 0.0]]), "pre": reduced * 1.3, "post": reduced}
            if scale is not None:
                step.update(scale=scale, growth=growth, finf=0.0)
            half = norm * norm / 2
            recs.append(step)
            recs.append(
                {
                    "k": "chk",
                    "s": s,
                    "params": [[1.0, 1.0]],
                    "params_names": ["w"],
                    "grads": [[0.1, half], [0.2, half], [0.3, 7.0]],
                    "grads_names": ["w", "b", "adapter.w"],
                    "unreduced": ["adapter.w"],
                    "n_unreduced": 1,
                }
            )
        recs.append({"k": "end", "s": len(stepped)})
        ranks[r] = recs
    return ranks


def _clip_notes(kb: Any, folder: Path) -> list[str]:
    return [w for w in read_trace(kb, folder).warnings if "uses_grad_clipping" in w]


def test_no_clip_call_and_untouched_gradients_measure_no_clipping(tmp_path, kb):  # type: ignore[no-untyped-def]
    folder = _write(tmp_path / "t", _clip_trace([3.0, 3.0], 3.0))
    f = _facts(kb, folder)
    assert f["uses_grad_clipping"].value is False
    assert "2 checked step" in (f["uses_grad_clipping"].detail or "")
    assert not _clip_notes(kb, folder)
    # Under a GradScaler the reduced gradients carry the loss scale.
    folder = _write(tmp_path / "t2", _clip_trace([3.0, 3.0], 3.0 * 1024, scale=1024.0))
    assert _facts(kb, folder)["uses_grad_clipping"].value is False


def test_gradients_rescaled_without_a_clip_call_leave_clipping_unknown(tmp_path, kb):  # type: ignore[no-untyped-def]
    # A hand-written clip (p.grad.mul_, torch._foreach_mul_) calls nothing the agent patches:
    # the stepped gradients are smaller than the all-reduce left them at step 2.
    folder = _write(tmp_path / "t", _clip_trace([3.0, 1.0], 3.0))
    assert "uses_grad_clipping" not in _facts(kb, folder)
    notes = _clip_notes(kb, folder)
    assert notes and "step 2" in notes[0] and "rescaled" in notes[0]
    folder = _write(tmp_path / "t2", _clip_trace([3.0, 1.0], 3.0 * 1024, scale=1024.0))
    assert "uses_grad_clipping" not in _facts(kb, folder)


def test_no_comparable_gradients_leave_clipping_unknown(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {r: [_start(r), _wrap(), _step(1, [[1.0, 0.0]]), {"k": "end", "s": 1}] for r in (0, 1)}
    folder = _write(tmp_path / "t", ranks)
    assert "uses_grad_clipping" not in _facts(kb, folder)
    assert _clip_notes(kb, folder)
    # The loss scale just grew at every step (the tracker restarted): the scale the reduced
    # gradients carried is not the one recorded, so nothing is compared.
    folder = _write(tmp_path / "t2", _clip_trace([3.0], 3.0 * 512, scale=1024.0, growth=0))
    assert "uses_grad_clipping" not in _facts(kb, folder)
    assert "GradScaler" in _clip_notes(kb, folder)[0]


def _unwrapped(version: int, **step_extra: Any) -> dict[int, list[dict[str, Any]]]:
    """Two ranks, three optimizer steps, no DDP wrap record."""
    per_rank: dict[int, list[dict[str, Any]]] = {}
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [{**_start(rank), "v": version}]
        for s in (1, 2, 3):
            recs.append({"k": "step", "s": s, "loss": [1.0], "lr": [0.1], "sch": 0, **step_extra})
        per_rank[rank] = recs
    return per_rank


@pytest.mark.parametrize(
    ("version", "extra", "wrapped", "expected"),
    [
        (3, {}, False, False),  # no wrapper, no shard, no large collective: nothing syncs
        (3, {}, True, True),  # a DDP wrap
        (3, {"bigcol": 4}, False, None),  # large all-reduces may be a sync by hand: unknown
        (2, {}, False, None),  # an older agent did not count collectives outside DDP
    ],
)
def test_gradient_sync_present(tmp_path, kb, version, extra, wrapped, expected):  # type: ignore[no-untyped-def]
    per_rank = _unwrapped(version, **extra)
    if wrapped:
        for recs in per_rank.values():
            recs.insert(1, _wrap())
    got = _facts(kb, _write(tmp_path / "t", per_rank)).get("gradient_sync_present")
    assert (got.value if got else None) is expected


def test_sharded_parameters_are_a_sync(tmp_path, kb):  # type: ignore[no-untyped-def]
    per_rank = _unwrapped(3)
    for recs in per_rank.values():
        recs.append(
            {
                "k": "chk",
                "s": 1,
                "params": [[1.0, 2.0]],
                "params_names": ["flat_param_0"],
                "sharded": ["flat_param_0"],
            }
        )
    got = _facts(kb, _write(tmp_path / "t", per_rank))["gradient_sync_present"]
    assert got.value is True and "sharded" in (got.detail or "")


@pytest.mark.parametrize(("why", "expected"), [("max_steps", 1.0), ("exit", 0.75)])
def test_the_step_cut_off_by_max_steps_has_no_scheduler_step_yet(tmp_path, kb, why, expected):  # type: ignore[no-untyped-def]
    # the scheduler steps once after every optimizer step; --max-steps ends the job right
    # after step 4, before its scheduler step: 3 of 3 possible, not 3 of 4
    per_rank: dict[int, list[dict[str, Any]]] = {}
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [_start(rank), {"k": "sched", "cls": "LambdaLR"}]
        for s in (1, 2, 3, 4):
            recs.append({"k": "step", "s": s, "loss": [1.0], "lr": [0.1], "sch": int(s > 1)})
        recs.append({"k": "end", "why": why, "s": 4, "sched": 3})
        per_rank[rank] = recs
    got = _facts(kb, _write(tmp_path / "t", per_rank))["scheduler_steps_per_optimizer_step"]
    assert got.value == expected


@pytest.mark.parametrize(("factor", "says_count"), [(0.5, False), (1 / 128, True)])
def test_a_division_by_another_count_than_the_accumulation_says_so(
    tmp_path, kb, factor, says_count
):  # type: ignore[no-untyped-def]
    per_rank: dict[int, list[dict[str, Any]]] = {}
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [_start(rank), _wrap()]
        for s in (1, 2, 3):
            recs.append(
                {
                    "k": "step",
                    "s": s,
                    "loss": [1.0, 1.1],
                    "syn": [False, True],
                    "lr": [0.1],
                    "sch": 0,
                    "fac": [factor, factor],
                }
            )
        per_rank[rank] = recs
    got = _facts(kb, _write(tmp_path / "t", per_rank))["loss_divided_by_accum"]
    assert got.value is True
    assert ("token or sample count" in (got.detail or "")) is says_count


@pytest.mark.parametrize("wrapped", [True, False])
def test_accelerate_steps_the_schedule_per_process_only_when_it_connected_them(
    tmp_path, kb, wrapped
):  # type: ignore[no-untyped-def]
    # AcceleratedScheduler advances the schedule num_processes times per optimizer step in a
    # distributed run (2 here); a run it never made distributed (no wrap, no collective)
    # steps it once: either way one step of the planned schedule per optimizer step
    per_rank = _unwrapped(3)
    for recs in per_rank.values():
        if wrapped:
            recs.insert(1, _wrap())
        recs.insert(
            1,
            {
                "k": "sched",
                "cls": "LambdaLR",
                "by": "accelerate.scheduler.AcceleratedScheduler.step",
            },
        )
        for rec in recs:
            if rec["k"] == "step":
                rec["sch"] = 2 if wrapped else 1
        recs.append({"k": "end", "why": "exit", "s": 3, "sched": 6 if wrapped else 3})
    got = _facts(kb, _write(tmp_path / "t", per_rank))["scheduler_steps_per_optimizer_step"]
    assert got.value == pytest.approx(1.0)


def _values(kb: Any, folder: Path) -> dict[str, Any]:
    return {o.fact: o.value for o in read_trace(kb, folder).observations}


def _token_trace(
    kept: dict[int, list[int]], reduction: str, factor: float | dict[int, float]
) -> dict[int, list[dict[str, Any]]]:
    """Two ranks, one loss call per step keeping ``kept[rank][step]`` of 32 targets; the loss
    reaches backward with ``factor`` (a constant, or per step on rank 0 the constant that a
    division by a count makes)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [_start(rank), _wrap()]
        for s, n in enumerate(kept[rank], start=1):
            f = factor[s] if isinstance(factor, dict) else factor
            step = _step(s, [[float(s), float(rank)]])
            step.update(ce=[[n, 32, reduction]], fac=[f])
            recs.append(step)
        out[rank] = recs
    return out


KEPT = {0: [4, 30, 6, 28, 5], 1: [29, 5, 31, 4, 30]}


@pytest.mark.parametrize(
    ("reduction", "factor", "normalised"),
    [
        ("m", 1.0, False),  # a per-rank mean, as it is
        # summed, divided by the targets kept on both ranks, times the world size (HF Trainer)
        ("s", {s + 1: 2 / (KEPT[0][s] + KEPT[1][s]) for s in range(5)}, True),
        ("s", {s + 1: 1 / KEPT[0][s] for s in range(5)}, False),  # summed, over its own count
        # summed, over the targets of both ranks, not multiplied back (DDP divides again)
        ("s", {s + 1: 1 / (KEPT[0][s] + KEPT[1][s]) for s in range(5)}, True),
        ("s", 0.01, None),  # divided by something else: not said
        # unreduced ("none", class weights allowed), summed by the loop, over the global
        # count and not multiplied back: the same as a summed loss
        ("n", {s + 1: 1 / (KEPT[0][s] + KEPT[1][s]) for s in range(5)}, True),
        ("n", 1.0, None),  # its mean over every position: no count to read
    ],
)
def test_what_a_token_loss_is_divided_by(tmp_path, kb, reduction, factor, normalised):  # type: ignore[no-untyped-def]
    facts = _values(kb, _write(tmp_path / "t", _token_trace(KEPT, reduction, factor)))
    assert facts["variable_length_sequences"] is True
    assert facts["token_count_imbalance"] >= 5
    assert facts.get("loss_normalised_by_global_tokens") is normalised
    # only the global count without the world size factor divides by the world size twice
    unscaled = (
        isinstance(factor, dict) and normalised and factor[1] * (KEPT[0][0] + KEPT[1][0]) < 1.5
    )
    # a factor of 1 is accounted for, and so is the global count times the world size (the
    # global token mean after the averaging); another count or constant leaves it open
    scaled = isinstance(factor, dict) and normalised and not unscaled
    expected = True if unscaled else False if factor == 1.0 or scaled else None
    assert facts.get("loss_divided_by_world_size") is expected


def test_a_loss_that_keeps_every_target_is_no_variable_length_batch(tmp_path, kb):  # type: ignore[no-untyped-def]
    full = {0: [32] * 5, 1: [32] * 5}
    facts = _values(kb, _write(tmp_path / "t", _token_trace(full, "m", 1.0)))
    assert facts["variable_length_sequences"] is False
    assert facts["token_count_imbalance"] == 1
    assert "loss_normalised_by_global_tokens" not in facts


def test_updates_rounded_away_in_low_precision_weights(tmp_path, kb):  # type: ignore[no-untyped-def]
    per_rank = {}
    for rank in (0, 1):
        wrap = _wrap() | {"dtypes": ["bfloat16"]}
        steps = [_step(s, [[float(s), float(rank)]]) | {"lowp": [48, 64]} for s in range(1, 4)]
        per_rank[rank] = [_start(rank), wrap, *steps]
    facts = _values(kb, _write(tmp_path / "t", per_rank))
    assert facts["precision"] == "pure_bf16"
    assert facts["low_precision_updates_lost"] == 0.75


@pytest.mark.parametrize(
    ("syn", "extra"),
    [
        ([False, True, True, True], True),  # no_sync window, an aux backward synced twice more
        ([False, True], False),  # no_sync on the first micro-batch, the last one syncs
        ([True, True], False),  # no no_sync: every micro-batch's backward syncs
        ([True, True, True, True], True),  # no no_sync, two backwards per micro-batch
        ([True, False, True], False),  # a no_sync period out of step: two syncs, no aux pass
    ],
)
def test_synchronising_backwards_beyond_the_window(tmp_path, kb, syn, extra):  # type: ignore[no-untyped-def]
    per_rank = {}
    for rank in (0, 1):
        steps = []
        for s in range(1, 6):
            dig = [[float(s), float(i)] for i in range(len(syn))]  # a micro-batch per backward
            if len(syn) == 4:  # the aux forward feeds each of two micro-batches again
                dig = [dig[0], dig[0], dig[1], dig[1]]
            step = _step(s, dig) | {"loss": [1.0] * len(syn), "syn": syn}
            steps.append(step)
        per_rank[rank] = [_start(rank), _wrap(), *steps]
    facts = _values(kb, _write(tmp_path / "t", per_rank))
    assert facts["grad_accum_steps"] == (3 if len(syn) == 3 else 2)
    assert facts["extra_backward_through_ddp"] is extra


@pytest.mark.parametrize(
    ("lrs", "warmup"),
    [
        ([0.5, 1.0, 1.0, 0.9, 0.8, 0.7], 2),  # linear warmup over 2 steps, then decay
        ([0.0, 0.5, 1.0, 1.0, 1.0, 1.0], 2),  # warmup from zero: the step at 0 is not counted
        ([1.0, 1.0, 0.9, 0.8, 0.7, 0.6], 0),  # no warmup: decays from the first step
        ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], None),  # still rising when the trace ends
        ([0.2, 0.4, 0.6, 0.8, 1.0, 0.9], None),  # the peak too close to the end to be one
    ],
)
def test_warmup_as_the_run_used_the_learning_rate(tmp_path, kb, lrs, warmup):  # type: ignore[no-untyped-def]
    per_rank = {}
    for rank in (0, 1):
        steps = [_step(s, [[float(s), float(rank)]]) | {"lr": [lr]} for s, lr in enumerate(lrs, 1)]
        per_rank[rank] = [_start(rank), _wrap(), *steps]
    facts = _values(kb, _write(tmp_path / "t", per_rank))
    assert facts.get("warmup_steps") == warmup


def test_a_count_that_fits_both_readings_is_skipped(tmp_path, kb):  # type: ignore[no-untyped-def]
    """Two micro-batches on two ranks, each rank dividing its summed loss by its own window's
    count. At step 1 that count (4 + 30) also equals micro-batch 0's count on both ranks
    (4 + 30): that step says nothing, and the others decide."""
    windows = {0: [[4, 30], [10, 20], [7, 25], [12, 3]], 1: [[30, 6], [25, 9], [8, 30], [6, 20]]}
    per_rank: dict[int, list[dict[str, Any]]] = {}
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [_start(rank), _wrap()]
        for s, pair in enumerate(windows[rank], start=1):
            step = _step(s, [[float(s), float(rank)]])
            step.update(
                loss=[1.0, 1.0],
                syn=[False, True],
                ce=[[n, 32, "s"] for n in pair],
                fac=[1 / sum(windows[0][s - 1])] * 2,
            )
            recs.append(step)
        per_rank[rank] = recs
    facts = _values(kb, _write(tmp_path / "t", per_rank))
    assert facts.get("loss_normalised_by_global_tokens") is False


WINDOWS = {0: [[4, 30], [10, 20], [7, 25], [12, 3]], 1: [[30, 6], [25, 9], [8, 30], [6, 20]]}


def _window_trace(divisor: str) -> dict[int, list[dict[str, Any]]]:
    """Two micro-batches per optimizer step on each of two ranks, each summed loss divided by
    a count: ``window`` the window's targets on both ranks times the world size, ``micro`` this
    micro-batch's targets on both ranks (times the world size, over the window length),
    ``own`` this rank's own window count, ``own_micro`` this rank's own micro-batch count (over
    the window length)."""
    per_rank: dict[int, list[dict[str, Any]]] = {}
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [_start(rank), _wrap()]
        for s, pair in enumerate(WINDOWS[rank], start=1):
            both = [WINDOWS[0][s - 1][i] + WINDOWS[1][s - 1][i] for i in range(2)]
            if divisor == "window":
                fac = [2 / sum(both)] * 2
            elif divisor == "micro":
                fac = [2 / (n * 2) for n in both]
            elif divisor == "own_micro":  # rank 0's own micro-batch count, over the window
                fac = [1 / (n * 2) for n in WINDOWS[0][s - 1]]
            else:
                fac = [1 / sum(WINDOWS[0][s - 1])] * 2  # rank 0's factors are the ones read
            step = _step(s, [[float(s), float(rank)]])
            step.update(
                loss=[1.0, 1.0], syn=[False, True], ce=[[n, 32, "s"] for n in pair], fac=fac
            )
            recs.append(step)
        per_rank[rank] = recs
    return per_rank


@pytest.mark.parametrize(
    ("divisor", "normalised", "rank_ratio", "micro_ratio"),
    [
        # one count for the window on all ranks: ranks and micro-batches weigh alike
        ("window", True, 1.0, 1.0),
        # micro-batch counts on both ranks 34/36, 35/29, 15/55, 18/23: 55/15 at the 90th pct;
        # each over all ranks, so the ranks weigh alike
        ("micro", False, 1.0, (3.6, 3.7)),
        # this rank's window count: its micro-batches weigh alike, the ranks do not
        ("own", False, (1.1, 3.0), 1.0),
        # each micro-batch over its own count on its rank: both weights unequal; rank 0's
        # window [4, 30] gives 7.5 at the 90th percentile of both ranks' windows
        ("own_micro", False, (1.1, 3.0), (7.4, 7.6)),
    ],
)
def test_how_unequally_a_divisor_weighs_the_targets(  # type: ignore[no-untyped-def]
    tmp_path, kb, divisor, normalised, rank_ratio, micro_ratio
):
    """What the loss is divided by decides how much a target weighs in the synced step: equal
    everywhere under the window's global count; unequal between the window's micro-batches
    when each is divided by its own count; unequal between ranks under a rank's own count."""
    facts = _values(kb, _write(tmp_path / "t", _window_trace(divisor)))
    assert facts.get("loss_normalised_by_global_tokens") is normalised
    for fact, want in (
        ("rank_token_weight_ratio", rank_ratio),
        ("micro_batch_token_weight_ratio", micro_ratio),
    ):
        got = facts.get(fact)
        if want is None or isinstance(want, float):
            assert got == want
        else:
            assert want[0] <= got <= want[1]


@pytest.mark.parametrize(
    ("skips", "grows", "counted"),
    [
        ({7}, {4}, 0),  # grown at step 4, overflows at 7, halves: the scaler probing
        ({7, 11}, {4, 9}, 0),  # probing again after growing back: healthy
        ({7, 8}, {4}, 1),  # a skip right after the probe: an overflow of its own
        ({7, 11}, {4}, 1),  # the second skip at a scale that never grew back
        ({5}, set(), 0),  # the run's first overflow, alone: the initial scale tested at last
        ({5, 9}, set(), 1),  # a second one at a scale that never grew back: an overflow
        ({5, 6}, set(), 2),  # skips in a row: overflows
    ],
)
def test_a_dynamic_loss_scale_probing_upwards_is_not_counted(tmp_path, kb, skips, grows, counted):  # type: ignore[no-untyped-def]
    run = _scaled_run(skips, steps=14, grows=frozenset(grows))
    other = [{**r, "rank": 1} if r["k"] == "start" else r for r in run]
    facts = _facts(kb, _write(tmp_path / "t", {0: run, 1: other}))
    got = facts["nonfinite_grad_steps"]
    assert got.value == counted
    assert ("scaler probing" in got.detail) == (len(skips) - counted > 0)


def test_an_evaluation_loader_is_not_taken_for_the_training_sampler(tmp_path, kb):  # type: ignore[no-untyped-def]
    """The training batches come from a loader the agent did not record (a custom batch
    sampler); the only sampler seen is an evaluation loader's, read out between steps: it says
    nothing of how the training data is sharded."""
    ranks = {}
    for r in (0, 1):
        recs: list[dict[str, Any]] = [_start(r), _wrap()]
        for s in range(1, 9):
            recs.append({**_step(s, [[float(s), 1.0]]), "t": float(s)})
            if s % 4 == 0:  # an evaluation after every fourth step, over in no time
                it = s // 4
                recs.append({**_epoch(it, r, s), "t": s + 0.1})
                recs.append(
                    {"k": "idx", "it": it, "part": 0, "idx": [r, r + 2], "end": True, "t": s + 0.2}
                )
        ranks[r] = recs
    f = _facts(kb, _write(tmp_path / "eval", ranks))
    assert f["batches_duplicated_across_ranks"].value is True
    assert "uses_distributed_sampler" not in f
    assert "sampler_shards_overlap" not in f
    # the same sampler iterated through the steps (no early end) is the training's
    for r in (0, 1):
        ranks[r] = [rec for rec in ranks[r] if rec["k"] != "idx"]
    f = _facts(kb, _write(tmp_path / "train", ranks))
    assert f["uses_distributed_sampler"].value is True


def _multistep(milestones: list[int], steps: int = 30) -> list[float]:
    return [0.05 * 0.2 ** sum(s >= m for m in milestones) for s in range(steps)]


@pytest.mark.parametrize(
    ("cls", "lrs", "overran"),
    [
        ("MultiStepLR", _multistep([18, 25]), False),  # decays at 60 % and 85 % of the run
        ("MultiStepLR", _multistep([3, 5]), True),  # milestones in epochs, stepped per batch
        ("StepLR", _multistep([2]), True),  # step size counted in epochs: one early cut
        ("MultiStepLR", _multistep([14]), False),  # the final rate held for 16 of 30 steps
        ("MultiStepLR", _multistep([8]), True),  # for 22 of 30: planned for a shorter run
        ("ReduceLROnPlateau", _multistep([3, 5]), False),  # the loss decides its cuts
        # a cosine decay to zero stepped past its end sits at zero: the rule of the zero tail
        ("CosineAnnealingLR", [0.05 * max(0.0, 1 - s / 10) for s in range(30)], True),
    ],
)
def test_a_schedule_done_decaying_early(tmp_path, kb, cls, lrs, overran):  # type: ignore[no-untyped-def]
    """A step decay planned for a shorter run takes its cuts in the first steps and holds its
    final rate for most of the run; a healthy one cuts late."""
    per_rank = {}
    for rank in (0, 1):
        steps = [_step(s, [[1.0, 1.0]]) | {"lr": [lr], "sch": 1} for s, lr in enumerate(lrs, 1)]
        sched = {"k": "sched", "cls": cls, "primary": True, "by": "__main__.main"}
        per_rank[rank] = [_start(rank), _wrap(), sched, *steps]
    facts = _values(kb, _write(tmp_path / "t", per_rank))
    assert facts.get("lr_schedule_overran") is overran
