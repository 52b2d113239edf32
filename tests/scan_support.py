"""Shared helpers for the static-scan tests: fixture annotations and cause → fact mapping.

Fixture scripts live beside the rule they exercise, ``tests/scan_fixtures/<area>/<rule>/`` as
the rule lives in ``ddpadvisor/scan/rules/<area>/<rule>.py`` (a script that exercises several
rules goes under the first one its ``# expect:`` lines name, preferring its own area), and are
annotated Semgrep-style:

- ``# expect: <cause-id>`` on a line: the scan must report, AT THAT LINE, a fact value
  that points at the cause (see :data:`CAUSE_FACTS`);
- ``# ok: <cause-id>`` on a lookalike line: no such report at that line;
- ``# scan-facts: fact=value fact=unknown …`` (anywhere, repeatable): the scan's decided
  value for each listed fact; ``unknown`` means the scan must leave the fact undecided.

Files whose name starts with ``_`` are helper modules imported by a fixture, not fixtures (the
copies in rule folders link to the one in ``tests/scan_fixtures/``). ``imports/`` holds small
repositories, not fixture scripts (``tests/test_scan_imports.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO

FIXTURES = REPO / "tests" / "scan_fixtures"

Check = object | Callable[[object], bool]

# Which fact values point at each cause. A callable tests the value.
CAUSE_FACTS: dict[str, list[tuple[str, Check]]] = {
    "no-distributed-sampler": [("uses_distributed_sampler", False)],
    "sampler-set-epoch-missing": [("calls_set_epoch", False)],
    "sampler-seed-differs-per-rank": [("sampler_seed_rank_dependent", True)],
    "augmentation-rng-identical-across-ranks": [
        ("rank_seeds_identical", True),
        ("uses_random_augmentation", True),
    ],
    "grad-accum-loss-not-scaled": [("loss_divided_by_accum", False)],
    "zero-grad-inside-accumulation": [("zero_grad_every_micro_step", True)],
    "no-sync-misaligned": [("final_micro_step_synced", False)],
    "ddp-wrapper-bypassed": [("forward_bypasses_ddp", True)],
    "extra-backward-through-ddp": [("extra_backward_through_ddp", True)],
    "loss-scaled-by-world-size": [("loss_multiplied_by_world_size", True)],
    "loss-divided-by-world-size": [("loss_divided_by_world_size", True)],
    "accum-token-normalisation": [("loss_normalised_by_global_tokens", False)],
    "per-rank-token-mean-loss": [("loss_normalised_by_global_tokens", False)],
    "clip-on-local-grads": [("clip_inside_no_sync", True)],
    "lr-scaled-too-aggressively": [("lr_scaling", "linear")],
    "warmup-too-short": [("warmup_steps", lambda v: isinstance(v, int) and v < 100)],
    "scheduler-step-miscounted": [
        (
            "scheduler_steps_per_optimizer_step",
            lambda v: isinstance(v, float) and not 0.9 <= v <= 1.1,
        )
    ],
    "adam-eps-beta2-unstable": [("adam_beta2", lambda v: isinstance(v, float) and v >= 0.99)],
    "grad-clip-missing": [("uses_grad_clipping", False)],
    "clip-before-unscale": [("unscale_before_clip", False)],
    "fp16-without-grad-scaler": [("uses_grad_scaler", False), ("precision", "fp16_amp")],
    "fp16-on-hardware-without-bf16": [("precision", "fp16_amp")],
    "pure-low-precision-weights": [("precision", lambda v: str(v).startswith("pure_"))],
    "params-added-after-ddp-wrap": [("module_created_after_wrap", True)],
    "checkpoint-loaded-on-rank0-only": [("rank_conditional_state_change", True)],
    "deepspeed-weights-loaded-after-initialize": [("ds_weights_loaded_after_init", True)],
    "deepspeed-step-per-accumulation-window": [
        ("ds_backwards_per_accumulation_window", lambda v: isinstance(v, float) and v >= 1.5)
    ],
    "batchnorm-without-syncbn": [("uses_syncbn", False), ("has_batchnorm", True)],
    "broadcast-buffers-disabled": [("broadcast_buffers_disabled", True)],
    "torch-compile-ddp-interaction": [("uses_torch_compile", True)],
    "rank0-only-loss-logging": [("logs_rank0_only", True)],
    "metric-reduction-wrong": [("logged_loss_reduction_wrong", True)],
    "custom-comm-hook-scaling": [("comm_hook_averages", False)],
}


def matches(check: Check, value: object) -> bool:
    if callable(check):
        return bool(check(value))
    return value == check


@dataclass
class Fixture:
    path: Path
    expect: list[tuple[int, str]] = field(default_factory=list)
    ok: list[tuple[int, str]] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)  # fact -> expected text value

    @property
    def name(self) -> str:
        return self.path.name


_ANNOT = re.compile(r"#\s*(expect|ok):\s*([a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*)")
_FACTS = re.compile(r"#\s*scan-facts:\s*(.*)$")


def parse_fixture(path: Path) -> Fixture:
    fx = Fixture(path)
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        m = _FACTS.search(line)
        if m:
            for pair in m.group(1).split():
                fact, _, value = pair.partition("=")
                fx.facts[fact] = value
            continue
        for kind, causes in _ANNOT.findall(line):
            for cause in (c.strip() for c in causes.split(",")):
                (fx.expect if kind == "expect" else fx.ok).append((lineno, cause))
    return fx


def fixture_paths() -> list[Path]:
    """Every fixture script, ``tests/scan_fixtures/<area>/<rule>/<name>.py``."""
    return sorted(
        p
        for p in FIXTURES.glob("*/*/*.py")
        if p.parts[-3] != "imports" and not p.name.startswith("_")
    )


def fixtures() -> list[Fixture]:
    return [parse_fixture(p) for p in fixture_paths()]


def fixture_path(name: str) -> Path:
    """The fixture script of this file name, in whichever rule's folder it lives."""
    found = [p for p in fixture_paths() if p.name == name]
    assert len(found) == 1, f"{len(found)} fixtures named {name}"
    return found[0]


def typed(text: str) -> object:
    """Fixture header values: true/false, ints, floats, else the enum text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text
