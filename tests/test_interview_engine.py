"""The interview (issue 13): declined facts stay declined, preconditions hold, a failed verify
counts against its cause, Chinese option labels are answers, and the catch-all is calibrated."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpadvisor.engine.diagnose import Engine, resolve
from ddpadvisor.engine.infer import posterior
from ddpadvisor.engine.questions import Step
from ddpadvisor.errors import InputError
from ddpadvisor.evidence.answers import read_answer_file, read_sets
from ddpadvisor.kb.values import parse_value
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import diagnose
from ddpadvisor.service import load_engine


@pytest.fixture(scope="module")
def engine() -> Engine:
    return load_engine()


def obs(engine: Engine, **facts: object) -> list[Observation]:
    out = []
    for fid, raw in facts.items():
        value = parse_value(engine.kb.facts[fid], raw)
        assert value is not None
        out.append(Observation(fact=fid, value=value, source="answer"))
    return out


def proposed(diagnosis) -> set[str]:  # type: ignore[no-untyped-def]
    return {f for s in diagnosis.next_steps for f in s.settles} | {
        q.fact for q in diagnosis.next_questions
    }


def test_a_declined_fact_never_comes_back(engine: Engine) -> None:
    declined: list[str] = []
    evidence = obs(engine, loss_pattern="oscillates")
    for _ in range(12):
        d = diagnose(engine, evidence, declined=declined)
        assert not set(declined) & proposed(d)
        asks = [s for s in d.next_steps if s.kind == "ask"]
        assert asks, "there is always a next best question when some are declined"
        declined.append(asks[0].fact or "")
    assert len(set(declined)) == 12


def test_a_declined_step_is_not_proposed(engine: Engine) -> None:
    d = diagnose(engine, obs(engine, loss_pattern="diverges"))
    ids = [s.id for s in d.next_steps]
    assert "trace" in ids or "scan" in ids
    d2 = diagnose(engine, obs(engine, loss_pattern="diverges"), declined=["trace", "scan"])
    assert not {"trace", "scan"} & {s.id for s in d2.next_steps}


def test_a_script_scanned_once_is_not_offered_again(engine: Engine) -> None:
    # the trace measured what the scan of its script found: the scan's value is superseded,
    # but the script was read, so "scan your training script" would only repeat it
    scanned = Observation(fact="uses_no_sync", value=True, source="script", where="train.py:9")
    measured = Observation(fact="uses_no_sync", value=False, source="trace")
    d = diagnose(engine, [scanned, measured, *obs(engine, loss_pattern="diverges")])
    assert [f.value for f in d.facts if f.fact == "uses_no_sync"] == [False]
    assert "scan" not in {s.id for s in d.next_steps}
    assert "scan" in {s.id for s in diagnose(engine, [measured]).next_steps}


def test_the_trace_step_command_reads_the_folder_trace_writes() -> None:
    from ddpadvisor.engine.questions import COMMANDS
    from ddpadvisor.tracing.cli import DEFAULT_OUT

    # the default folder, or the fresh sibling trace takes when that one holds a trace
    assert f"--trace {DEFAULT_OUT} (or the -2, -3" in COMMANDS["trace"]


def test_unmet_preconditions_never_appear(engine: Engine) -> None:
    kb = engine.kb
    gated = {f.id for f in kb.facts.values() if f.ask_if}
    assert {"final_micro_step_synced", "unscale_before_clip", "noise_only_early"} <= gated
    d = diagnose(engine, obs(engine, loss_pattern="plateau", grad_accum_steps=1))
    asked = {s.fact for s in d.next_steps if s.kind == "ask"}
    assert not asked & {"noise_only_early", "loss_divided_by_accum", "final_micro_step_synced"}
    # Met: accumulation with no_sync makes the final micro-step question askable.
    d = diagnose(engine, obs(engine, grad_accum_steps=4, uses_no_sync=True))
    post = engine.posterior(obs(engine, grad_accum_steps=4, uses_no_sync=True))
    winners = {o.fact: o for o in obs(engine, grad_accum_steps=4, uses_no_sync=True)}
    all_asks = {s.facts[0] for s in engine.steps(post, winners) if s.kind == "ask"}
    assert "final_micro_step_synced" in all_asks
    assert d.next_steps


def test_measured_facts_are_never_plain_questions(engine: Engine) -> None:
    d = diagnose(engine, obs(engine, single_gpu_converges=True, loss_pattern="oscillates"))
    measured = {"param_checksums_match", "grads_match_after_sync", "params_not_in_reducer"}
    assert not measured & {s.fact for s in d.next_steps if s.kind == "ask"}
    settled_by_runs = {f for s in d.next_steps if s.kind != "ask" for f in s.settles}
    assert measured & settled_by_runs


def test_a_failed_verify_lowers_its_cause(engine: Engine) -> None:
    evidence = obs(
        engine, gpu_model="A100", precision="fp16_amp", uses_grad_scaler=True, loss_pattern="nan"
    )
    before = diagnose(engine, evidence)
    lead = before.causes[0]
    assert lead.id == "fp16-on-hardware-without-bf16"
    fix = lead.fixes[0].id
    after = diagnose(engine, evidence, verified={fix: "failed"})
    score = {c.id: c.score for c in after.causes}
    assert score[lead.id] < lead.score / 2
    assert after.verified == {fix: "failed"}
    item = next(e for c in after.causes if c.id == lead.id for e in c.evidence)
    assert item.fact == f"verified.{fix}" and item.direction == "against"


def test_answers_file_declines_and_verifies(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(
        "facts:\n  loss_pattern: 震荡\n  precision: 不知道\n  uses_no_sync: 否\n"
        "declined: [trace]\nverified: {add-grad-scaler: failed}\n",
        encoding="utf-8",
    )
    got = read_answer_file(engine.kb, path)
    values = {o.fact: o.value for o in got.observations}
    assert values == {"loss_pattern": "oscillates", "uses_no_sync": False}
    assert got.declined == ["precision", "trace"]
    assert got.verified == {"add-grad-scaler": "failed"}
    sets = read_sets(
        engine.kb, ["loss_pattern=发散", "verified.add-grad-scaler=failed", "scan=unknown"]
    )
    assert sets.observations[0].value == "diverges"
    assert sets.declined == ["scan"] and sets.verified == {"add-grad-scaler": "failed"}
    with pytest.raises(InputError, match="unknown fix id"):
        read_sets(engine.kb, ["verified.no-such-fix=failed"])


def test_m40_is_not_bf16_capable(engine: Engine) -> None:
    from ddpadvisor.kb.values import classify

    gpu = engine.kb.facts["gpu_model"]
    for name in ("Tesla M40", "Tesla V100-SXM2-32GB", "Tesla T4", "GeForce GTX 1080 Ti"):
        assert classify(gpu, name) == "no-bf16", name
    for name in ("NVIDIA A100-SXM4-80GB", "H100", "RTX 4090"):
        assert classify(gpu, name) == "bf16-capable", name


def test_a_rare_symptom_lowers_no_fault(engine: Engine) -> None:
    empty = diagnose(engine, [])
    # nothing observed: the catch-all leads on its prior, and nothing looks any way yet
    assert empty.causes[0].id == "other" and empty.verdict == "undecided"
    assert empty.causes[0].title.startswith("No catalogued fault")
    nan = diagnose(engine, obs(engine, loss_pattern="nan"))
    score = {c.id: c.score for c in nan.causes}
    # the catch-all also stands for faults the KB does not know, which go NaN too: it falls,
    # but not to nothing
    assert 0.05 < score["other"] < empty.causes[0].score
    other = next(c for c in nan.causes if c.id == "other")
    assert [e.direction for e in other.evidence] == ["against"]
    # one symptom that many faults, known or not, produce singles out nothing
    assert nan.verdict == "undecided" and nan.causes[0].score < 0.30
    # every loss symptom a job with no fault rarely shows lowers "no fault", none raises it
    for symptom in (
        "spikes",
        "diverges",
        "nan",
        "worse_than_reference",
        "metric_only",
        "resume_jump",
    ):
        got = diagnose(engine, obs(engine, loss_pattern=symptom))
        share = next(c.score for c in got.causes if c.id == "other")
        assert share < empty.causes[0].score, symptom
        assert got.verdict != "looks-healthy", symptom


def test_nothing_fits_is_told_from_looks_healthy(engine: Engine) -> None:
    said = obs(engine, loss_pattern="oscillates", noise_only_early=True)
    # what a person says of a run is no finding about the job: a best guess at most
    assert diagnose(engine, said).verdict == "undecided"
    seen = Observation(fact="uses_distributed_sampler", value=True, source="script")
    healthy = diagnose(engine, [*said, seen])
    assert healthy.causes[0].id == "other" and healthy.verdict == "looks-healthy"
    assert healthy.causes[0].title.startswith("Looks healthy")
    ruled_out = obs(
        engine,
        loss_pattern="diverges",
        uses_torch_compile=False,
        precision="fp32",
        hand_written_loop=False,
        lr_scaling="none",
        single_gpu_converges=False,
        uses_grad_clipping=True,
        warmup_steps=2000,
    )
    d = diagnose(engine, ruled_out)
    assert d.causes[0].id == "other" and d.verdict == "nothing-fits"
    assert d.causes[0].title.startswith("Nothing catalogued fits")


def test_a_weak_lead_is_undecided_not_most_likely(engine: Engine) -> None:
    # one symptom that many causes explain: a catalogued cause leads, but only as a best guess
    weak = diagnose(engine, obs(engine, loss_pattern="worse_than_reference"))
    assert not weak.causes[0].catch_all and weak.causes[0].score < 0.30
    assert weak.verdict == "undecided"
    assert weak.summary.startswith("No cause stands out yet; best so far: " + weak.causes[0].id)
    strong = diagnose(
        engine, obs(engine, uses_distributed_sampler=False, single_gpu_converges=True)
    )
    assert strong.causes[0].score >= 0.30 and strong.verdict == "cause"
    assert strong.summary.startswith("Most likely: " + strong.causes[0].id)


def test_no_cause_leads_on_an_unknown_setup_fact(engine: Engine) -> None:
    d = diagnose(engine, obs(engine, gpu_model="V100", loss_pattern="nan"))
    lead = d.causes[0]
    assert lead.waits_on == []
    fp16 = next(c for c in d.causes if c.id == "fp16-on-hardware-without-bf16")
    assert fp16.waits_on == ["precision"]
    known = diagnose(
        engine, obs(engine, gpu_model="V100", loss_pattern="nan", precision="fp16_amp")
    )
    assert known.causes[0].id == "fp16-on-hardware-without-bf16"


def test_no_cause_leads_on_the_setup_alone(engine: Engine) -> None:
    # "trains in fp16 with a GradScaler" is how healthy jobs run: nothing is wrong yet
    setup = diagnose(engine, obs(engine, precision="fp16_amp", uses_grad_scaler=True))
    assert setup.causes[0].id == "other"
    fp16 = next(c for c in setup.causes if c.id == "fp16-on-hardware-without-bf16")
    assert fp16.waits_on and "precision" not in fp16.waits_on
    # a symptom or a fact about the hardware backs it, and the hold goes
    for more in ({"loss_pattern": "nan"}, {"gpu_supports_bf16": False}):
        d = diagnose(engine, obs(engine, precision="fp16_amp", uses_grad_scaler=True, **more))
        assert d.causes[0].id == "fp16-on-hardware-without-bf16", more
        assert d.causes[0].waits_on == []
    # a setup that is itself the slip (fp16 weights, no fp32 master copy) needs no symptom
    pure = diagnose(engine, obs(engine, precision="pure_fp16"))
    assert pure.causes[0].id == "pure-low-precision-weights"


def test_every_question_has_zh_and_labels(engine: Engine) -> None:
    for fact in engine.kb.facts.values():
        assert fact.zh and fact.zh.get("question"), fact.id
        if fact.type in ("bool", "enum") and "asked" in fact.sources:
            zh = fact.zh.get("labels")
            assert isinstance(zh, dict) and "unknown" in zh, fact.id
            assert fact.labels and "unknown" in fact.labels, fact.id


def test_every_question_says_how_to_find_the_answer(engine: Engine) -> None:
    for fact in engine.kb.facts.values():
        if "asked" in fact.sources:
            assert fact.help, fact.id
            assert fact.zh and fact.zh.get("help"), fact.id


def test_a_run_of_dont_knows_brings_measured_steps_forward(engine: Engine) -> None:
    evidence = obs(engine, loss_pattern="diverges")
    fresh = diagnose(engine, evidence)
    declined = [s.fact or "" for s in fresh.next_steps if s.kind == "ask"][:2]
    later = diagnose(engine, evidence, declined=declined)
    before = {s.id: s for s in fresh.next_steps}
    both = [s for s in later.next_steps if s.id in before]
    assert any(s.kind == "ask" for s in both) and any(s.kind != "ask" for s in both)
    for step in both:
        if step.kind == "ask":
            assert step.chance < before[step.id].chance, step.id
        else:  # a probe, trace or scan needs no knowledge: its chance does not move
            assert step.chance == before[step.id].chance, step.id


def all_steps(engine: Engine, evidence: list[Observation], declined: list[str]) -> dict[str, Step]:
    """Every step the engine would rank (the diagnosis shows only the best few)."""
    winners = engine.with_implied(resolve(evidence).winners)
    post = posterior(engine.model, engine.observed_classes(winners))
    return {s.id: s for s in engine.steps(post, winners, declined=declined)}


def test_a_declined_scan_lowers_the_trace_but_not_the_probes(engine: Engine) -> None:
    # A scan and a trace both need the training script; a probe needs only the machine.
    evidence = obs(engine, loss_pattern="diverges")
    fresh = all_steps(engine, evidence, [])
    later = all_steps(engine, evidence, ["scan"])
    assert "scan" in fresh and "scan" not in later
    assert later["trace"].chance < fresh["trace"].chance
    probes = [sid for sid, s in fresh.items() if s.kind == "probe"]
    assert probes and all(later[sid].chance == fresh[sid].chance for sid in probes)


def test_a_declined_probe_lowers_the_other_probes_and_the_trace(engine: Engine) -> None:
    evidence = obs(engine, loss_pattern="diverges")
    fresh = all_steps(engine, evidence, [])
    probes = [sid for sid, s in fresh.items() if s.kind == "probe"]
    assert len(probes) >= 2
    later = all_steps(engine, evidence, [probes[0]])
    assert all(later[sid].chance < fresh[sid].chance for sid in probes[1:])
    assert later["trace"].chance < fresh["trace"].chance
    assert later["scan"].chance == fresh["scan"].chance
