"""From the recovered structure to fact values: the rules and the ONE table that lists them.

Each rule lives in the module named after the ``kb/causes/<area>.yaml`` whose causes its facts
mostly serve, and is a function ``rule(rc: RuleContext) -> None``. :data:`RULES` lists them in
the order they run, with the facts each one may set. ``run_rules`` refuses (in strict mode) a
fact a rule did not declare, and ``tests/test_scan_rules.py`` checks that every declared fact
is a KB fact the static scan may supply (``sources`` includes ``script``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ddpadvisor.scan.interp import WalkResult
from ddpadvisor.scan.rules import (
    accumulation,
    data,
    measurement,
    optimisation,
    precision,
    replicas,
    runtime,
)
from ddpadvisor.scan.rules.base import Finding, RuleContext, UndeclaredFact

__all__ = [
    "EXCERPT_CANNOT_SHOW",
    "RULES",
    "Finding",
    "Rule",
    "RuleContext",
    "UndeclaredFact",
    "run_rules",
]


@dataclass(frozen=True)
class Rule:
    run: Callable[[RuleContext], None]
    facts: frozenset[str]

    @property
    def name(self) -> str:
        return self.run.__name__

    @property
    def area(self) -> str:
        """The KB cause file this rule belongs to (its module's name)."""
        return self.run.__module__.rsplit(".", 1)[-1]


def _rule(run: Callable[[RuleContext], None], *facts: str) -> Rule:
    return Rule(run, frozenset(facts))


# In run order. A fact is set by exactly one rule.
RULES: tuple[Rule, ...] = (
    _rule(runtime.framework_note),
    _rule(data.data_sharding, "uses_distributed_sampler"),
    _rule(data.sampler_seed, "sampler_seed_rank_dependent"),
    _rule(data.set_epoch, "calls_set_epoch"),
    _rule(
        accumulation.accumulation,
        "grad_accum_steps",
        "loss_divided_by_accum",
        "zero_grad_every_micro_step",
    ),
    _rule(accumulation.no_sync, "uses_no_sync", "final_micro_step_synced"),
    _rule(accumulation.forward_route, "forward_bypasses_ddp"),
    _rule(accumulation.extra_backward, "extra_backward_through_ddp"),
    _rule(accumulation.loss_scaling, "loss_multiplied_by_world_size"),
    _rule(accumulation.loss_division, "loss_divided_by_world_size"),
    _rule(precision.precision, "precision", "uses_grad_scaler"),
    _rule(precision.clipping, "uses_grad_clipping", "clip_inside_no_sync", "unscale_before_clip"),
    _rule(runtime.compile, "uses_torch_compile"),
    _rule(replicas.lora_and_wrap_order, "uses_lora", "module_created_after_wrap"),
    _rule(replicas.rank_conditional, "rank_conditional_state_change"),
    _rule(runtime.sharding_framework, "uses_fsdp_or_zero"),
    _rule(replicas.batchnorm, "has_batchnorm", "uses_syncbn"),
    _rule(replicas.broadcast_buffers, "broadcast_buffers_disabled"),
    _rule(optimisation.lr_scaling, "lr_scaling"),
    _rule(optimisation.schedule, "scheduler_steps_per_optimizer_step", "warmup_steps"),
    _rule(optimisation.optimizer, "optimizer_family", "adam_beta2"),
    _rule(measurement.batch_size, "per_gpu_batch_size"),
    _rule(
        accumulation.loss_shape,
        "loss_reduction",
        "variable_length_sequences",
        "loss_normalised_by_global_tokens",
    ),
    _rule(measurement.logging, "logged_loss_reduction_wrong", "logs_rank0_only"),
    _rule(data.augmentation, "uses_random_augmentation"),
    _rule(data.seeding, "rank_seeds_identical"),
    _rule(runtime.loop_kind, "hand_written_loop"),
    _rule(accumulation.comm_hook, "uses_comm_hook", "comm_hook_averages"),
)


# What an excerpt of a script (the code in a forum post) can show, per fact: the values listed
# here are the ones a rule concludes from code being absent ("no no_sync()", "no autocast"),
# which an excerpt cannot support, so ``scan_excerpt`` drops them; None: the fact is read from
# whole scripts only. Every fact of RULES is listed (a test checks), so a new rule decides.
EXCERPT_CANNOT_SHOW: dict[str, frozenset[object] | None] = {
    # True is read off the sampler; False only where the excerpt shows the loader's loop too
    # (a loader built here may be handed to accelerate or Lightning further down)
    "uses_distributed_sampler": frozenset({False}),
    "sampler_seed_rank_dependent": frozenset(),  # off the sampler's constructor
    "calls_set_epoch": frozenset({False}),
    "grad_accum_steps": frozenset({1}),
    "loss_divided_by_accum": frozenset(),  # off the backward line inside the window shown
    "zero_grad_every_micro_step": frozenset(),
    "uses_no_sync": frozenset({False}),
    "final_micro_step_synced": frozenset({True}),  # True also when no no_sync() is seen
    "forward_bypasses_ddp": frozenset(),  # off the forward call shown
    "extra_backward_through_ddp": frozenset({False}),
    "loss_multiplied_by_world_size": frozenset({False}),
    "loss_divided_by_world_size": frozenset({False}),
    "precision": frozenset({"fp32"}),
    "uses_grad_scaler": frozenset({False}),
    "uses_grad_clipping": frozenset({False}),
    "clip_inside_no_sync": frozenset({False}),  # False also when no no_sync() is seen
    "unscale_before_clip": frozenset(),
    "uses_torch_compile": frozenset({False}),
    "uses_lora": frozenset({False}),
    "module_created_after_wrap": frozenset({False}),
    "rank_conditional_state_change": frozenset({False}),
    "uses_fsdp_or_zero": frozenset({False}),
    "has_batchnorm": frozenset({False}),
    "uses_syncbn": frozenset({False}),
    "broadcast_buffers_disabled": frozenset(),  # off the DDP constructor's keywords
    "lr_scaling": frozenset({"none"}),
    "scheduler_steps_per_optimizer_step": None,  # needs the whole loop and its totals
    "warmup_steps": None,
    "optimizer_family": frozenset(),
    "adam_beta2": frozenset(),
    "per_gpu_batch_size": frozenset(),
    "loss_reduction": frozenset(),
    "variable_length_sequences": frozenset({False}),
    "loss_normalised_by_global_tokens": frozenset({False}),
    "logged_loss_reduction_wrong": frozenset({False}),
    "logs_rank0_only": frozenset({False}),
    "uses_random_augmentation": frozenset({False}),
    "rank_seeds_identical": frozenset(),
    "hand_written_loop": frozenset(),
    "uses_comm_hook": frozenset({False}),
    # a sum over the ranks is the average when the loss was divided by the world size before
    # backward, which a piece of a script need not show
    "comm_hook_averages": frozenset({False}),
}

# A value listed above that an excerpt does show when it also shows this fact to be True.
EXCERPT_SHOWN_WITH: dict[str, str] = {
    "final_micro_step_synced": "uses_no_sync",
    "clip_inside_no_sync": "uses_no_sync",
    "uses_distributed_sampler": "hand_written_loop",
}


def run_rules(
    walk: WalkResult, *, strict: bool = False, given: Mapping[str, object] | None = None
) -> RuleContext:
    """Run every rule of :data:`RULES` over one walk; the context holds findings and warnings.
    ``given``: fact values other evidence supplies (see ``RuleContext.given``)."""
    rc = RuleContext(walk, strict=strict, given=given)
    if rc.a.main_backward is None and rc.a.framework is None:
        rc.warn(
            f"{rc.label}: no backward() call and no HF Trainer found; "
            "only facts about the setup were read"
        )
    for rule in RULES:
        rc.declared, rc.running = (rule.facts if rc.strict else None), rule.name
        try:
            rule.run(rc)
        except Exception as exc:  # one confused rule must not lose the others' findings
            if rc.strict:
                raise
            rc.warn(f"{rc.label}: scanner rule {rule.name} gave up ({type(exc).__name__})")
        finally:
            rc.declared, rc.running = None, ""
    if walk.truncated:
        rc.warn(f"{rc.label}: very large script; the scan stopped early and may miss facts")
    return rc
