"""Trace folder -> measured facts, on hand-written per-rank records (no torch, no launch)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.trace import read_trace


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def _start(rank: int, world: int = 2) -> dict[str, Any]:
    return {
        "k": "start",
        "v": 1,
        "rank": rank,
        "world": world,
        "backend": "gloo",
        "torch": "2.13.0",
    }


def _wrap() -> dict[str, Any]:
    return {
        "k": "wrap",
        "ddp": 0,
        "n_buffers": 0,
        "forward_sync_buffers": True,
        "batchnorm": [],
        "dtypes": ["float32"],
        "seeds": {"torch": "aa", "python": "bb"},
    }


def _step(s: int, loss: float | list[float] = 1.0, **extra: Any) -> dict[str, Any]:
    rec = {
        "k": "step",
        "s": s,
        "loss": loss if isinstance(loss, list) else [loss],
        "fac": [1.0],
        "syn": [True],
        "bflag": [True],
        "fflag": [True],
        "lr": [1e-3],
        "sch": 0,
        "dig": [[float(s), float(s) * 3]],
    }
    rec.update(extra)
    return rec


def _check(s: int, params: list[list[float]], **extra: Any) -> dict[str, Any]:
    rec = {
        "k": "chk",
        "s": s,
        "params": params,
        "params_names": [f"layers.{i}.weight" for i in range(len(params))],
        "grads": params,
        "grads_names": [f"layers.{i}.weight" for i in range(len(params))],
        "optim": [],
        "optim_names": [],
    }
    rec.update(extra)
    return rec


def _write(
    folder: Path, per_rank: dict[int, list[dict[str, Any]]], meta: dict[str, Any] | None = None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, records in per_rank.items():
        text = "".join(json.dumps(r) + "\n" for r in records)
        (folder / f"rank{rank}.jsonl").write_text(text)
    if meta is not None:
        (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def _facts(got) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {o.fact: o for o in got.observations}


def _healthy_rank(rank: int, steps: int = 12, **step_extra: Any) -> list[dict[str, Any]]:
    recs = [_start(rank), _wrap()]
    for s in range(1, steps + 1):
        recs.append(_step(s, loss=2.0 / s, dig=[[float(s), float(rank * 100 + s)]], **step_extra))
        if s in (1, 2, 4, 8):
            recs.append(_check(s, [[1.0 * s, 2.0], [0.5, 0.25]]))
    recs.append({"k": "end", "s": steps, "sched": 0})
    return recs


def test_healthy_trace_measures_healthy_values(tmp_path, kb):  # type: ignore[no-untyped-def]
    folder = _write(tmp_path / "t", {r: _healthy_rank(r) for r in (0, 1)})
    got = read_trace(kb, folder)
    f = _facts(got)
    assert not got.failed
    assert f["param_checksums_match"].value is True
    assert f["grads_match_after_sync"].value is True
    assert f["optimizer_steps_without_sync"].value == 0
    assert f["final_micro_step_synced"].value is True
    assert f["batches_duplicated_across_ranks"].value is False
    assert f["world_size"].value == 2
    assert all(o.source == "trace" for o in got.observations)
    assert "loss_pattern" not in f  # a smoothly falling loss is not one of the patterns


def test_replica_divergence_names_tensor_rank_and_step(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {r: _healthy_rank(r) for r in (0, 1)}
    for rec in ranks[1]:
        if rec["k"] == "chk" and rec["s"] >= 4:
            rec["params"][1] = [0.5, 0.2500001]
    got = read_trace(kb, _write(tmp_path / "t", ranks))
    obs = _facts(got)["param_checksums_match"]
    assert obs.value is False
    assert obs.where == "rank 1 step 4"
    assert obs.detail == "replicas diverged at step 4: layers.1.weight (rank 1)"


@pytest.mark.parametrize(
    ("first", "unreduced", "changed"),
    [
        (0, [], True),  # differing before any step: changed on some ranks after the broadcast
        (4, [], None),  # diverged in training: not said
        (0, ["layers.1.weight"], None),  # a parameter DDP never held, never broadcast
    ],
)
def test_replicas_differing_before_any_step_were_changed_after_the_wrap(  # type: ignore[no-untyped-def]
    tmp_path, kb, first, unreduced, changed
):
    ranks = {r: _healthy_rank(r) for r in (0, 1)}
    for r in (0, 1):
        ranks[r].insert(2, _check(0, [[0.0, 2.0], [0.5, 0.25]], unreduced=unreduced))
    for rec in ranks[1]:
        if rec["k"] == "chk" and rec["s"] >= first:
            rec["params"][1] = [0.5, 0.2500001]
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["param_checksums_match"].value is False
    got = f.get("rank_conditional_state_change")
    assert (got.value if got else None) is changed


def test_nan_fingerprints_on_every_rank_are_not_a_divergence(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {r: _healthy_rank(r) for r in (0, 1)}
    for recs in ranks.values():
        for rec in recs:
            if rec["k"] == "chk":
                rec["grads"] = [[math.nan, math.nan], [0.5, 0.25]]
    got = read_trace(kb, _write(tmp_path / "t", ranks))
    assert _facts(got)["grads_match_after_sync"].value is True


def test_truncated_last_line_is_tolerated_with_a_warning(tmp_path, kb):  # type: ignore[no-untyped-def]
    folder = _write(tmp_path / "t", {r: _healthy_rank(r) for r in (0, 1)})
    path = folder / "rank1.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n" + lines[-3][: len(lines[-3]) // 2])
    got = read_trace(kb, folder)
    n = len(lines) - 2
    assert any(w.startswith(f"{path}:{n}: truncated last record") for w in got.warnings), (
        got.warnings
    )
    assert _facts(got)["param_checksums_match"].value is True


def test_failed_run_sets_failed_and_keeps_facts(tmp_path, kb):  # type: ignore[no-untyped-def]
    meta = {"status": "failed", "failure": {"kind": "hung", "ranks": [1], "message": "rank 1 hung"}}
    folder = _write(tmp_path / "t", {r: _healthy_rank(r) for r in (0, 1)}, meta)
    got = read_trace(kb, folder)
    assert got.failed
    assert "trace run failed: rank 1 hung" in got.warnings
    assert got.observations


def test_missing_and_empty_folders_are_bad_input(tmp_path, kb):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="no such trace folder"):
        read_trace(kb, tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no rank"):
        read_trace(kb, tmp_path / "empty")


def test_identical_batches_and_losses_across_ranks(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap()]
        recs += [_step(s, loss=1.0 + 0.1 * (s % 3)) for s in range(1, 11)]  # same digest per step
        ranks[r] = recs
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["batches_duplicated_across_ranks"].value is True
    assert (
        "ranks 0 and 1 fed identical batches at 10 of 10 steps"
        in f["batches_duplicated_across_ranks"].detail
    )
    assert f["rank_losses_identical"].value is True


def _epoch(it: int, rank: int, epoch: int, seed: int = 0, s: int = 0) -> dict[str, Any]:
    return {
        "k": "epoch",
        "it": it,
        "sampler": 0,
        "cls": "DistributedSampler",
        "dataset_len": 8,
        "seed": seed,
        "epoch": epoch,
        "shuffle": True,
        "num_replicas": 2,
        "rank": rank,
        "set_epoch_calls": [],
        "s": s,
    }


def test_sampler_overlap_and_repeated_epoch_order(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {}
    orders = {0: [3, 1, 7, 5], 1: [3, 2, 7, 0]}
    for r in (0, 1):
        recs = [_start(r), _wrap()]
        for e in range(2):
            recs.append(_epoch(e + 1, r, epoch=0, seed=r, s=e * 2))
            recs.append({"k": "idx", "it": e + 1, "part": 0, "idx": orders[r], "end": True})
            recs += [_step(e * 2 + 1), _step(e * 2 + 2)]
        ranks[r] = recs
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["sampler_order_repeats_across_epochs"].value is True
    assert (
        f["sampler_order_repeats_across_epochs"].detail == "epoch 2 order equals epoch 1 (rank 0)"
    )
    assert f["calls_set_epoch"].value is False
    assert f["sampler_seed_rank_dependent"].value is True
    assert f["sampler_shards_overlap"].value is False  # 2 shared indices: within padding for W=2
    orders[1] = [3, 1, 7, 0]
    for r in (0, 1):
        ranks[r] = [rec if rec["k"] != "idx" else {**rec, "idx": orders[r]} for rec in ranks[r]]
    f = _facts(read_trace(kb, _write(tmp_path / "t2", ranks)))
    assert f["sampler_shards_overlap"].value is True
    assert "share 3 indices" in f["sampler_shards_overlap"].detail


def test_accumulation_facts_from_loss_factor_and_zeroing(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap()]
        for s in range(1, 9):
            digests = [[float(s * 10 + m), 1.0] for m in range(4)]
            recs.append(
                _step(
                    s,
                    loss=[0.5] * 4,
                    fac=[1.0] * 4,
                    syn=[False, False, False, True],
                    bflag=[False, False, False, True],
                    fflag=[False, False, False, True],
                    dig=digests,
                    zb=True,
                    sch=4,
                )
            )
        recs.append({"k": "sched", "cls": "LambdaLR"})
        recs.append({"k": "end", "s": 8, "sched": 32})
        ranks[r] = recs
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["grad_accum_steps"].value == 4
    assert f["loss_divided_by_accum"].value is False
    assert f["grad_norm_scales_with_accum"].value is True
    assert f["zero_grad_every_micro_step"].value is True
    assert f["uses_no_sync"].value is True
    assert f["final_micro_step_synced"].value is True
    assert f["scheduler_steps_per_optimizer_step"].value == 4.0


def _factor_facts(tmp_path, kb, fac, fterms):  # type: ignore[no-untyped-def]
    """Two ranks, five steps whose loss reaches backward with factor ``fac`` over a sum of
    ``fterms`` terms (None: one term); the facts the trace reads."""
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap()]
        for s in range(1, 6):
            extra = {"fterms": fterms} if fterms else {}
            recs.append(_step(s, loss=[0.5], fac=[fac], syn=[True], **extra))
        ranks[r] = recs
    return _facts(read_trace(kb, _write(tmp_path / "t", ranks)))


@pytest.mark.parametrize(
    ("fac", "fterms", "divided"),
    [
        (0.5, None, True),  # loss / world size on two ranks
        (0.5, [2], None),  # (a + b) / 2 on two ranks: an average of two terms as much
        (0.5, [3], True),  # (a + b + c) / 2: the 2 is not the terms' count
        (1.0, None, False),  # the loss as it is
        (1.0, [2], None),  # kd / world + ce: a division inside a term is not seen
        (0.08, None, None),  # some other constant (a temperature, a count): left open
    ],
)
def test_loss_divided_by_world_size_only_where_the_factor_shows_it(  # type: ignore[no-untyped-def]
    tmp_path, kb, fac, fterms, divided
):
    got = _factor_facts(tmp_path, kb, fac, fterms).get("loss_divided_by_world_size")
    assert (got.value if got else None) is divided


@pytest.mark.parametrize(
    ("fac", "fterms", "multiplied"),
    [
        (2.0, None, True),  # loss * world size on two ranks
        (2.0, [3], True),  # (a + b + c) * 2: the factor shows it whatever the terms
        (1.0, None, False),  # the loss as it is
        (1.0, [3], None),  # three weighted terms: a weight times the world size is unseen
    ],
)
def test_loss_multiplied_by_world_size_only_where_the_factor_shows_it(  # type: ignore[no-untyped-def]
    tmp_path, kb, fac, fterms, multiplied
):
    got = _factor_facts(tmp_path, kb, fac, fterms).get("loss_multiplied_by_world_size")
    assert (got.value if got else None) is multiplied


def test_steps_without_sync_and_bypassed_wrapper(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {
        r: [_start(r), _wrap()] + [_step(s, syn=[False], byp=1) for s in range(1, 6)]
        for r in (0, 1)
    }
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["optimizer_steps_without_sync"].value == 5
    assert f["final_micro_step_synced"].value is False
    assert f["forward_bypasses_ddp"].value is True


def test_gradients_with_no_forward_through_the_wrapper_are_a_bypass(tmp_path, kb):  # type: ignore[no-untyped-def]
    """A window whose backward gave the wrapped parameters gradients with no forward through
    any wrapper (the agent infers the bypass: ``bypi``) reads as a bypass, and its unsynced
    last backward is not blamed on a require_backward_grad_sync flag set too late."""
    steps = [_step(s, syn=[False], bflag=[True], byp=1, bypi=True) for s in range(1, 6)]
    for rec in steps:
        del rec["fflag"]  # no forward through the wrapper: no flag read at forward
    ranks = {r: [_start(r), _wrap(), *steps] for r in (0, 1)}
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["forward_bypasses_ddp"].value is True
    assert "no forward through the wrapper" in f["forward_bypasses_ddp"].detail
    assert "False at forward" not in (f["final_micro_step_synced"].detail or "")


def test_loss_spikes_and_single_rank_spike(tmp_path, kb):  # type: ignore[no-untyped-def]
    curve = [1.0, 0.9, 0.85, 0.8, 0.8, 0.78, 9.0, 0.77, 0.76, 0.75, 0.74, 0.73]
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap()]
        for s, v in enumerate(curve, start=1):
            loss = v if (r == 1 or s != 7) else 0.78
            recs.append(_step(s, loss=loss))
        ranks[r] = recs
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["loss_pattern"].value == "spikes"
    assert f["loss_pattern"].detail == "loss spikes at steps 7"
    assert f["loss_spike_single_rank"].value is True
    assert f["loss_spike_single_rank"].where == "rank 1 step 7"


def test_a_spike_every_rank_shares_is_no_single_rank_spike(tmp_path, kb):  # type: ignore[no-untyped-def]
    """Both ranks' losses jump at step 7 (a rate too high), rank 1's batch three times rank
    0's there as at every step: measured against its own recent level no rank spikes alone."""
    base = [1.0, 0.9, 0.85, 0.8, 0.8, 0.78, 6.0, 0.77, 0.76, 0.75, 0.74, 0.73]
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap()]
        for s, v in enumerate(base, start=1):
            recs.append(_step(s, loss=v * (3.2 if r == 1 else 1.0)))
        ranks[r] = recs
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert f["loss_pattern"].value == "spikes"
    assert f["loss_spike_single_rank"].value is False


def test_a_loss_around_zero_has_no_spikes(tmp_path, kb):  # type: ignore[no-untyped-def]
    """A policy-gradient loss wanders around zero: a step at +0.3 after steps near -0.1 is
    no multiple of any level, so neither a spike nor one rank's spike is read."""
    curve = [-0.12, -0.1, -0.15, -0.08, -0.11, -0.09, 0.3, -0.1, -0.12, -0.07, -0.1, -0.09]
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap()]
        for s, v in enumerate(curve, start=1):
            recs.append(_step(s, loss=v if (r == 1 or s != 7) else -0.1))
        ranks[r] = recs
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    assert "loss_pattern" not in f
    assert "loss_spike_single_rank" not in f


def test_last_run_of_an_appended_file_is_read(tmp_path, kb):  # type: ignore[no-untyped-def]
    old = [_start(0), _step(1, syn=[False])]
    ranks = {0: old + _healthy_rank(0), 1: _healthy_rank(1)}
    got = read_trace(kb, _write(tmp_path / "t", ranks))
    assert _facts(got)["optimizer_steps_without_sync"].value == 0
    assert any("holds 2 runs" in w for w in got.warnings)


def test_scaler_state_difference_is_located(tmp_path, kb):  # type: ignore[no-untyped-def]
    ranks = {}
    for r in (0, 1):
        recs = [_start(r), _wrap(), {"k": "cfg", "scaler": True}]
        for s in range(1, 6):
            scale = 65536.0 if (r == 0 or s < 3) else 32768.0
            recs.append(_step(s, scale=scale, growth=s))
        ranks[r] = recs
    f = _facts(read_trace(kb, _write(tmp_path / "t", ranks)))
    obs = f["scaler_state_match"]
    assert obs.value is False
    assert obs.where == "rank 1 step 3"
    assert obs.detail.startswith("scaler state differs on rank 1 at step 3")
    assert f["uses_grad_scaler"].value is True


def test_a_trace_with_no_step_is_a_failed_run_never_healthy(tmp_path: Path) -> None:
    """Only a start line (and a meta.json that is a list): the reader says no step was
    recorded, the run counts as failed (exit 3) and the verdict is never 'looks-healthy'."""
    import subprocess
    import sys

    start = {"k": "start", "v": 3, "rank": 0, "world": 2, "backend": "gloo", "t": 0.01}
    (tmp_path / "rank0.jsonl").write_text(json.dumps(start) + "\n")
    (tmp_path / "meta.json").write_text("[]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "--json", "--trace", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] != "looks-healthy" and out["run_failed"] is True
    assert any(str(tmp_path) in w and "no optimizer step" in w for w in out["warnings"])
