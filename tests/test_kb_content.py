"""The bundled cause catalogue: SPEC vocabulary, completeness of every cause, and the
calibration properties the diagnosis relies on (healthy evidence favours the catch-all,
measured symptoms shared by several causes are decided by discriminating facts)."""

from __future__ import annotations

import itertools
import re
import subprocess

import pytest

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.kb.values import parse_value
from ddpadvisor.observation import Observation
from tests.conftest import PYTHON, REPO, SHARED

# SPEC "Required public vocabulary (v1)": the KB may add causes, never drop or rename these.
SPEC_CAUSES = {
    "no-distributed-sampler",
    "sampler-set-epoch-missing",
    "sampler-seed-differs-per-rank",
    "augmentation-rng-identical-across-ranks",
    "outlier-batch-spike",
    "grad-accum-loss-not-scaled",
    "zero-grad-inside-accumulation",
    "no-sync-misaligned",
    "ddp-wrapper-bypassed",
    "extra-backward-through-ddp",
    "loss-scaled-by-world-size",
    "accum-token-normalisation",
    "per-rank-token-mean-loss",
    "clip-on-local-grads",
    "baseline-not-equivalent",
    "lr-scaled-too-aggressively",
    "warmup-too-short",
    "scheduler-step-miscounted",
    "adam-eps-beta2-unstable",
    "grad-clip-missing",
    "clip-before-unscale",
    "fp16-without-grad-scaler",
    "fp16-on-hardware-without-bf16",
    "grad-scaler-state-diverged",
    "pure-low-precision-weights",
    "params-added-after-ddp-wrap",
    "checkpoint-loaded-on-rank0-only",
    "batchnorm-without-syncbn",
    "broadcast-buffers-disabled",
    "torch-compile-ddp-interaction",
    "nccl-env-override",
    "faulty-collective",
    "rank0-only-loss-logging",
    "metric-reduction-wrong",
    "expected-early-noise",
}

SPEC_FACTS = {
    "single_gpu_converges": "bool",
    "single_gpu_same_global_batch": "bool",
    "loss_pattern": "enum",
    "precision": "enum",
    "uses_grad_scaler": "bool",
    "grad_accum_steps": "int",
    "uses_no_sync": "bool",
    "uses_torch_compile": "bool",
    "torch_version": "str",
    "uses_lora": "bool",
    "uses_fsdp_or_zero": "bool",
    "uses_distributed_sampler": "bool",
    "calls_set_epoch": "bool",
    "lr_scaling": "enum",
    "global_batch_ratio": "float",
    "warmup_steps": "int",
    "uses_grad_clipping": "bool",
    "loss_reduction": "enum",
    "variable_length_sequences": "bool",
    "has_batchnorm": "bool",
    "uses_syncbn": "bool",
    "logs_rank0_only": "bool",
    "world_size": "int",
    "gpu_model": "str",
    "nccl_algo": "str",
    "param_checksums_match": "bool",
    "buffer_checksums_match": "bool",
    "grads_match_after_sync": "bool",
    "clip_norms_match_across_ranks": "bool",
    "scaler_state_match": "bool",
    "sampler_shards_overlap": "bool",
    "batches_duplicated_across_ranks": "bool",
    "sampler_order_repeats_across_epochs": "bool",
    "allreduce_correct": "bool",
    "rank_seeds_identical": "bool",
    "gpu_supports_bf16": "bool",
    "scheduler_steps_per_optimizer_step": "float",
    "nonfinite_grad_steps": "int",
}

MEASURED = ("probe", "trace")


def _rank(engine: Engine, facts: dict[str, object]) -> list[str]:
    kb = engine.kb
    obs = [
        Observation(fact=f, value=parse_value(kb.facts[f], v), source="trace")  # type: ignore[arg-type]
        for f, v in facts.items()
    ]
    post = engine.posterior(obs)
    return [post.causes[i] for i in post.ranking()]


def test_every_spec_cause_is_catalogued(engine: Engine) -> None:
    assert set(engine.kb.causes) >= SPEC_CAUSES, SPEC_CAUSES - set(engine.kb.causes)


def test_spec_cause_list_matches_the_spec_when_available() -> None:
    spec = SHARED / "SPEC.md"
    if not spec.is_file():
        pytest.skip("shared SPEC.md not available")
    text = spec.read_text(encoding="utf-8")
    section = text.split("Required public vocabulary", 1)[1].split("Facts (type)", 1)[0]
    ids = set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", section))
    assert ids == SPEC_CAUSES


def test_every_spec_fact_exists_with_its_type(engine: Engine) -> None:
    facts = engine.kb.facts
    for fid, ftype in SPEC_FACTS.items():
        assert fid in facts, fid
        assert facts[fid].type == ftype, fid


@pytest.mark.parametrize("cause_id", sorted(SPEC_CAUSES | {"custom-comm-hook-scaling"}))
def test_cause_is_complete(engine: Engine, cause_id: str) -> None:
    kb = engine.kb
    cause = kb.causes[cause_id]
    assert len(cause.mechanism.split()) >= 25, "mechanism should explain, in a few sentences"
    assert cause.references, "every cause cites PyTorch docs, source, an issue or a paper"
    assert all(r.url.startswith("https://") for r in cause.references)
    assert cause.fixes
    for fix_id in cause.fixes:
        fix = kb.fixes[fix_id]
        assert fix.code is not None and fix.code.after.strip(), f"{fix_id} has no code"
        assert fix.verify.command.strip() and fix.verify.expect.strip()
    tops = [t for t in kb.tests if t.expect_top == cause_id]
    assert tops, "a realistic case where this cause ranks first"
    near_misses = [
        t
        for t in kb.tests
        if any(a == cause_id for a, _ in t.expect_below) or cause_id in t.expect_not_top
    ]
    assert near_misses, "a similar-looking case where another cause wins"


# A verify command measures: it runs the fixed job (a trace, with --verify or read back), a
# probe, or reads back a run it just made. It never types in the answers that declare success.
MEASURING = re.compile(r"^(?:[A-Z_]+=\S+ )*ddpadvisor (?:trace|probe)\b")
DECLARING = re.compile(r"--set\b|--answers\b|\bverified\.")


def test_every_fix_is_verified_by_a_measurement(engine: Engine) -> None:
    bad = [
        f"{fix.id}: {fix.verify.command}"
        for fix in engine.kb.fixes.values()
        if not MEASURING.match(fix.verify.command) or DECLARING.search(fix.verify.command)
    ]
    assert not bad, "verify commands that do not measure:\n" + "\n".join(bad)


def test_the_verify_check_tells_measuring_from_declaring() -> None:
    assert MEASURING.match("ddpadvisor trace --nproc 2 --verify x -- train.py")
    assert MEASURING.match("NCCL_DEBUG=INFO ddpadvisor probe collectives --nproc 2")
    assert not MEASURING.match("ddpadvisor --json --set lr_scaling=sqrt")
    assert not MEASURING.match("ddpadvisor --json --script train.py")
    assert DECLARING.search(
        "ddpadvisor trace -- x.py && ddpadvisor --json --set lower_lr_fixes_it=true"
    )


def test_every_cause_can_be_reached_by_questions(engine: Engine) -> None:
    """A user without a trace must be able to move each cause with an answer."""
    kb = engine.kb
    askable = {f.id for f in kb.facts.values() if "asked" in f.sources}
    for cause in kb.causes.values():
        linked = {link.fact for link in cause.evidence}
        for via in cause.via:
            linked |= {link.fact for link in kb.mechanisms[via.mechanism].evidence}
        assert linked & askable, cause.id


def test_no_two_causes_predict_the_same_evidence(engine: Engine) -> None:
    model = engine.model
    profiles = {}
    for ci, cid in enumerate(model.causes[:-1]):
        profiles[cid] = tuple(
            (fid, tuple(round(p, 4) for p in table.likelihood[ci]))
            for fid, table in sorted(model.facts.items())
            if ci in table.likelihood
        )
    for a, b in itertools.combinations(profiles, 2):
        assert profiles[a] != profiles[b], f"{a} and {b} cannot be told apart"


def test_measured_healthy_job_ranks_the_catch_all_first(engine: Engine) -> None:
    """Every measured fact at its healthy value: no cause may beat 'other'."""
    healthy: dict[str, object] = {}
    for fact in engine.kb.facts.values():
        if not set(fact.sources) & set(MEASURED) or fact.id in ("torch_version", "gpu_model"):
            continue
        table = engine.model.facts[fact.id]
        mode = table.classes[max(range(len(table.healthy)), key=table.healthy.__getitem__)]
        value: object
        if fact.type == "bool":
            value = mode == "true"
        elif fact.type == "enum":
            value = mode
        elif fact.type in ("int", "float"):
            value = _representative(fact.bins or [], mode, fact.min, fact.max)
        else:
            continue
        healthy[fact.id] = value
    assert _rank(engine, healthy)[0] == "other"


def _representative(
    edges: list[float], label: str, low: float | None = None, high: float | None = None
) -> float:
    """A number inside the class ``label`` of a binned fact (and inside its min..max)."""
    if label.startswith("<"):
        return edges[0] - 1 if low is None else low
    if label.startswith(">="):
        return edges[-1] + 1 if high is None else high
    lo, hi = (float(x) for x in label.split(".."))
    return (lo + hi) / 2


SHARED_SYMPTOM = {
    "world_size": 2,
    "param_checksums_match": False,
}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            {
                "grad_accum_steps": 4,
                "optimizer_steps_without_sync": 9,
                "grads_match_after_sync": False,
                "final_micro_step_synced": False,
            },
            "no-sync-misaligned",
        ),
        (
            {
                "grad_accum_steps": 1,
                "optimizer_steps_without_sync": 30,
                "grads_match_after_sync": False,
                "forward_bypasses_ddp": True,
            },
            "ddp-wrapper-bypassed",
        ),
        (
            {
                "grad_accum_steps": 1,
                "params_not_in_reducer": 8,
                "grads_match_after_sync": False,
                "optimizer_steps_without_sync": 0,
            },
            "params-added-after-ddp-wrap",
        ),
        (
            {
                "grad_accum_steps": 1,
                "grads_match_after_sync": True,
                "optimizer_steps_without_sync": 0,
                "params_not_in_reducer": 0,
            },
            "checkpoint-loaded-on-rank0-only",
        ),
        (
            {
                "grad_accum_steps": 1,
                "allreduce_correct": False,
                "grads_match_after_sync": True,
                "optimizer_steps_without_sync": 0,
            },
            "faulty-collective",
        ),
        (
            {
                "grad_accum_steps": 1,
                "scaler_state_match": False,
                "grads_match_after_sync": True,
                "optimizer_steps_without_sync": 0,
                "params_not_in_reducer": 0,
            },
            "grad-scaler-state-diverged",
        ),
    ],
)
def test_diverged_replicas_are_attributed_by_the_discriminating_fact(
    engine: Engine, extra: dict[str, object], expected: str
) -> None:
    assert _rank(engine, {**SHARED_SYMPTOM, **extra})[0] == expected


def test_kb_validate_and_test_pass_from_the_command_line() -> None:
    for sub in ("validate", "test"):
        proc = subprocess.run(
            [PYTHON, "-m", "ddpadvisor", "kb", sub],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
