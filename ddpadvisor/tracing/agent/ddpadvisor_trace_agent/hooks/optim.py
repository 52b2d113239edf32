"""Hooks into torch: optimizer step hooks, zero_grad, load_state_dict and LR schedulers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from .. import runtime as rt
from ..core import _record_load
from ..runtime import _busy, _compiling, _wrap


def install() -> None:
    from torch.optim.optimizer import (
        Optimizer,
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        a = rt.AGENT
        if a is not None and not _compiling():
            a.counters["phase"] = "optimizer"
            a.safe("step", a.on_opt_pre, opt)
        return None

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        a = rt.AGENT
        if a is not None and not _compiling():
            a.safe("step", a.on_opt_post, opt)
        return None

    rt.on_undo(register_optimizer_step_pre_hook(pre).remove)
    rt.on_undo(register_optimizer_step_post_hook(post).remove)

    def make_zero(orig: Any) -> Any:
        def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            if a is not None and not _busy():
                w = a.window
                w.zero_calls += 1
                if w.backwards:
                    w.zero_after_backward = True
            return orig(self, *args, **kwargs)

        return zero_grad

    _wrap(Optimizer, "zero_grad", "opt_zero_grad", make_zero)
    _wrap(torch.nn.Module, "zero_grad", "module_zero_grad", make_zero)

    def make_load(kind: str) -> Callable[[Any], Any]:
        def make(orig: Any) -> Any:
            def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
                a = rt.AGENT
                if a is not None and not _busy():
                    a.safe("load", _record_load, a, self, kind)
                return orig(self, *args, **kwargs)

            return load_state_dict

        return make

    _wrap(Optimizer, "load_state_dict", "opt_load", make_load("optimizer"))
    _wrap(torch.nn.Module, "load_state_dict", "module_load", make_load("model"))

    from torch.optim import lr_scheduler

    def make_sched(orig: Any) -> Any:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            if a is None or getattr(self, "_is_initial", False) or _busy():
                return orig(self, *args, **kwargs)
            outer = a.sched_depth == 0
            a.sched_depth += 1
            try:
                return orig(self, *args, **kwargs)
            finally:
                a.sched_depth -= 1
                if outer:
                    # only the schedules of the counted optimizer count against its steps
                    # (a second optimizer's scheduler, stepped beside it, is its own)
                    mine = _is_primary_opt(self) or a.primary is None
                    if mine:
                        a.window.sched += 1
                        a.sched_total += 1
                    key = f"sched{id(self)}"
                    if key not in a.seen_cfg:
                        a.safe("sched", a.cfg, key, _sched_record(self, sys._getframe(1), mine))
                        a.sched_plans[key] = [type(self).__name__, _planned_steps(self), 0, 0]
                    plan = a.sched_plans.get(key)
                    if plan is not None:
                        # the scheduler's own count: a scheduler rebuilt and restored from a
                        # checkpoint (load_state_dict) goes on from where the last one was
                        done = getattr(self, "last_epoch", None)
                        plan[2] = done if isinstance(done, int) else plan[2] + 1
                        plan[3] = a.step
                        plan[4:] = [mine]

        return step

    base = getattr(lr_scheduler, "LRScheduler", None)
    classes = [base] if base is not None else []
    for obj in vars(lr_scheduler).values():
        if (
            isinstance(obj, type)
            and base is not None
            and issubclass(obj, base)
            and obj is not base
            and "step" in vars(obj)
            and obj.__name__ != "ReduceLROnPlateau"
        ):
            classes.append(obj)
    for cls in classes:
        _wrap(cls, "step", f"sched_step.{cls.__name__}", make_sched)


def _sched_record(s: Any, caller: Any, mine: bool) -> dict[str, Any]:
    """The scheduler, and who calls its ``step`` (``module.Qualified.name``): a framework's
    wrapper (accelerate's ``AcceleratedScheduler.step``) may step it several times per call by
    design, which the reader must know to count the schedule right."""
    code = caller.f_code
    name = getattr(code, "co_qualname", code.co_name)
    by = f"{caller.f_globals.get('__name__', '?')}.{name}"
    return {"k": "sched", "cls": type(s).__name__, "primary": mine, "by": by}


def _planned_steps(s: Any) -> int | None:
    """How many steps a scheduler is built to take before its schedule ends: OneCycleLR's
    ``total_steps``, CosineAnnealingLR's ``T_max``, PolynomialLR's ``total_iters``, a
    SequentialLR's last milestone plus its last scheduler's length, and a LambdaLR over a
    ``functools.partial`` with ``num_training_steps`` (the transformers schedules). None where
    the schedule has no end (step decays, warm restarts, a constant after warmup) or its
    length is not readable."""
    name = type(s).__name__
    try:
        if name == "OneCycleLR":
            n = s.total_steps
        elif name == "CosineAnnealingLR":
            n = s.T_max
        elif name == "PolynomialLR":
            n = s.total_iters
        elif name == "SequentialLR":
            last = _planned_steps(s._schedulers[-1])
            n = None if last is None else int(s._milestones[-1]) + last
        elif name == "LambdaLR":
            # one function per param group, the same one for all of them as a rule
            fns = s.lr_lambdas
            same = len({id(f) for f in fns}) == 1
            keywords = getattr(fns[0], "keywords", None) if fns and same else None
            n = (keywords or {}).get("num_training_steps")
        else:
            n = None
    except Exception:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        return None
    return n


def _is_primary_opt(s: Any) -> bool:
    """Whether scheduler ``s`` schedules the counted optimizer: the same object, or one
    wrapping the other (a DeepSpeed ZeRO optimizer keeps the client's as ``.optimizer``;
    accelerate's AcceleratedOptimizer too)."""
    a = rt.AGENT
    opt = getattr(s, "optimizer", None)
    counted = a.primary() if a is not None and a.primary is not None else None
    if counted is None or opt is None:
        return False
    return (
        counted is opt
        or getattr(counted, "optimizer", None) is opt
        or getattr(opt, "optimizer", None) is counted
    )


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("optim")
