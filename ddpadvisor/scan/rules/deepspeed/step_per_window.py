from __future__ import annotations

import ast

from ddpadvisor.scan.analysis import find_mod
from ddpadvisor.scan.context import CondCtx, LoopCtx
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule

# DeepSpeed counts a micro-step in engine.step() and reaches its accumulation boundary every
# gradient_accumulation_steps calls (deepspeed/runtime/engine.py: is_gradient_accumulation_
# boundary, step). A loop that calls engine.backward on every micro-batch but engine.step()
# only under its own ``(i + 1) % k == 0`` stretches the engine's window k times.


@rule(
    "Whether a loop calls engine.step() only once per its own accumulation window.",
    facts={"ds_backwards_per_accumulation_window": not_in_excerpt(1.0)},
)
def step_per_window(rc: RuleContext) -> None:
    engine = rc.ds
    if engine is None:
        return
    a = rc.a
    mine = {engine.ref}
    backs = [e for e in a.calls("backward") if e.recv is not None and e.recv.ref in mine]
    steps = [e for e in a.calls("step") if e.recv is not None and e.recv.ref in mine]
    if not backs or not steps:
        return
    fact = "ds_backwards_per_accumulation_window"
    owned = [e for e in a.calls("set_gradient_accumulation_boundary")]
    if owned or _unmanaged(rc):
        # the loop owns the boundary (accelerate does this), or the config hands accumulation
        # to the caller (managed_gradient_accumulation: false): a step per window is right
        return
    back = backs[0]
    loops = {id(c.node) for c in back.ctx if isinstance(c, LoopCtx)}
    for step in steps:
        shared = [c for c in step.ctx if isinstance(c, LoopCtx) and id(c.node) in loops]
        if not shared:
            continue
        inner = step.ctx[step.ctx.index(shared[-1]) + 1 :]
        guards = [c for c in inner if isinstance(c, CondCtx) and c.branch and c not in back.ctx]
        mods = [m for c in guards if (m := _modulo(c.test)) is not None]
        if not mods:
            continue
        k = mods[0]
        if isinstance(k, int) and k >= 2:
            rc.emit(
                fact,
                float(k),
                step.where,
                f"engine.step() runs once per {k} engine.backward calls ({step.where}): "
                f"DeepSpeed counts its micro-steps in step(), so its window is {k} times "
                "the configured gradient_accumulation_steps",
            )
        else:
            rc.warn(
                f"{step.where}: engine.step() runs under the loop's own modulo test, with a "
                "count the scan cannot read; ds_backwards_per_accumulation_window left open"
            )
        return
    if all(not isinstance(c, CondCtx) for s in steps for c in s.ctx if c not in back.ctx):
        rc.emit(
            fact,
            1.0,
            steps[0].where,
            "engine.step() follows every engine.backward (DeepSpeed keeps the boundary)",
        )


def _unmanaged(rc: RuleContext) -> bool:
    """The config (a dict or JSON the scan read) names managed_gradient_accumulation."""
    modules = [rc.walk.sources.main, *rc.walk.sources.modules.values()]
    return any(s.value == "managed_gradient_accumulation" for m in modules for s in m.index.strings)


def _modulo(test: ast.expr) -> int | str | None:
    """The divisor of a modulo in the test (an int when it is a constant), None without one."""
    mod = find_mod(test)
    if mod is None:
        return None
    right = mod.right
    if isinstance(right, ast.Constant) and isinstance(right.value, int):
        return right.value
    return ast.unparse(right)
