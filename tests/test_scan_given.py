"""Defaults are not facts: a rule does not stop at a command-line default the run may override,
and what the user gives (``--set``, an answers file, an attached config) reopens it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ddpadvisor.evidence.gather import Sources, gather
from ddpadvisor.report.present import diagnose
from ddpadvisor.scan import scan_file
from tests.scan_support import fixture_path

NOT_SCALED = fixture_path("accum_flag_default_not_scaled.py")
SCALED = fixture_path("accum_flag_default_scaled_ok.py")
RATIO = "scheduler_steps_per_optimizer_step"


def _script_facts(engine: Any, **kw: Any) -> dict[str, object]:
    got = gather(engine.kb, Sources(scripts=[NOT_SCALED], **kw))
    return {o.fact: o.value for o in got.observations if o.source == "script"}


def test_a_default_count_leaves_the_count_open_but_reads_the_loss() -> None:
    result = scan_file(NOT_SCALED, strict=True)
    assert result.value("grad_accum_steps") is None
    assert result.value("loss_divided_by_accum") is False
    assert result.value(RATIO) is None  # a per-micro-batch step: k per step, k unknown
    assert any("grad_accum_steps is 1 only by command-line default" in w for w in result.warnings)


def test_a_given_count_reopens_what_depends_on_it() -> None:
    result = scan_file(NOT_SCALED, strict=True, given={"grad_accum_steps": 4})
    assert result.value(RATIO) == 4.0
    assert result.value("grad_accum_steps") is None  # the user's answer, not a scanned fact
    assert not any("only by command-line default" in w for w in result.warnings)
    # a scheduler stepped under the step's own condition does not depend on the count
    assert scan_file(SCALED, strict=True, given={"grad_accum_steps": 4}).value(RATIO) == 1.0


def test_set_reaches_the_scan(engine: Any) -> None:
    assert RATIO not in _script_facts(engine)
    assert _script_facts(engine, sets=["grad_accum_steps=8"])[RATIO] == 8.0


def test_answers_file_reaches_the_scan(engine: Any, tmp_path: Path) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("grad_accum_steps: 2\n")
    assert _script_facts(engine, answers=[answers])[RATIO] == 2.0


def test_attached_deepspeed_config_reaches_the_scan(engine: Any, tmp_path: Path) -> None:
    ds = tmp_path / "ds_config.json"
    ds.write_text(
        json.dumps({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 3})
    )
    assert _script_facts(engine, attach=[f"deepspeed:{ds}"])[RATIO] == 3.0


def test_the_run_with_a_given_count_leads_with_its_two_faults(engine: Any) -> None:
    """The fixture's loss is not divided and its scheduler steps per micro-batch: with the
    count given, both lead; without it, neither is certain."""
    faults = {"grad-accum-loss-not-scaled", "scheduler-step-miscounted"}
    got = gather(engine.kb, Sources(scripts=[NOT_SCALED], sets=["grad_accum_steps=4"]))
    top = diagnose(engine, got.observations).causes[:2]
    assert {c.id for c in top} == faults
    assert top[0].score >= 0.30


def test_a_given_count_decides_whether_accelerate_skips_the_sync() -> None:
    # accumulate() enters no_sync only before a boundary: one micro-batch per step never does
    flagged = fixture_path("accelerate_accumulate_count_flag.py")
    assert scan_file(flagged, strict=True).value("uses_no_sync") is None
    assert (
        scan_file(flagged, strict=True, given={"grad_accum_steps": 1}).value("uses_no_sync")
        is False
    )
    assert (
        scan_file(flagged, strict=True, given={"grad_accum_steps": 4}).value("uses_no_sync") is True
    )


def test_one_micro_batch_given_opens_a_sync_flag_toggled_on_a_derived_count() -> None:
    # ``require_backward_grad_sync = micro_step == count - 1`` with a count derived from the
    # world size: the flag skips syncs only when the run accumulates, which the run says
    derived = fixture_path("flag_late_derived_count.py")
    assert scan_file(derived, strict=True).value("uses_no_sync") is True
    one = scan_file(derived, strict=True, given={"grad_accum_steps": 1})
    assert one.value("uses_no_sync") is None
    assert any("one micro-batch per step; uses_no_sync not decided" in w for w in one.warnings)
    four = scan_file(derived, strict=True, given={"grad_accum_steps": 4})
    assert four.value("uses_no_sync") is True


def test_a_given_count_decides_a_scheduler_stepped_on_every_micro_batch() -> None:
    # the scheduler steps on the skipped micro-batches and after optimizer.step() (under the
    # same option as it): once per micro-batch, i.e. the run's count per optimizer step
    stepped = fixture_path("sched_on_skipped_micro_steps.py")
    assert scan_file(stepped, strict=True).value(RATIO) is None
    assert scan_file(stepped, strict=True, given={"grad_accum_steps": 4}).value(RATIO) == 4.0
    assert scan_file(stepped, strict=True, given={"grad_accum_steps": 8}).value(RATIO) == 8.0


def test_an_attached_accelerate_config_decides_the_sharding_of_prepare() -> None:
    """prepare() wraps as the launch's accelerate config says: with none given it is plain
    DDP; a config the run gives (FSDP here) decides instead, and the scan states nothing that
    would outrank it."""
    script = fixture_path("accelerate_subclass.py")
    assert scan_file(script, strict=True).value("uses_fsdp_or_zero") is False
    given = scan_file(script, strict=True, given={"uses_fsdp_or_zero": True})
    assert given.value("uses_fsdp_or_zero") is None
    assert any("accelerate config" in w for w in given.warnings)
