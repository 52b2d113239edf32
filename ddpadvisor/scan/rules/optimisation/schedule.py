from __future__ import annotations

import ast
import re

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.context import CondCtx, Event, FuncCtx, LoopCtx, common_prefix
from ddpadvisor.scan.interp import FuncRef
from ddpadvisor.scan.library.views import SCRIPT, Warmup
from ddpadvisor.scan.rules.base import RuleContext, function_constants, num
from ddpadvisor.scan.rules.registry import WHOLE_SCRIPT, rule
from ddpadvisor.scan.values import Obj, Val


@rule(
    "How often the scheduler steps per optimizer step, and the warmup length.",
    facts={
        "scheduler_steps_per_optimizer_step": WHOLE_SCRIPT,  # needs the whole loop and its totals
        "warmup_steps": WHOLE_SCRIPT,
    },
)
def schedule(rc: RuleContext) -> None:
    fw = rc.framework
    said = fw.warmup() if fw is not None else SCRIPT
    if isinstance(said, Warmup):
        rc.say("warmup_steps", said.steps)
        rc.say("scheduler_steps_per_optimizer_step", said.scheduler_per_step)
        return
    _warmup(rc)
    _sched_ratio(rc)


def _warmup(rc: RuleContext) -> None:
    """``warmup_steps``: decided only when every path that sets the learning rate was read —
    the scheduler's own warmup argument (a literal, not a command-line default), a hand-written
    ramp's function, or no schedule at all. A ``param_group["lr"]`` assignment is a hand-written
    schedule and overrides whatever scheduler is also built; a scheduler from a factory the
    scan does not know, a warmup length from an unread config or the command line, and code
    the scan cannot read that gets the optimizer all leave it undecided."""
    a = rc.a
    scheds = a.objs(V.SCHEDULER)
    groups = [
        e
        for e in a.events
        if e.kind == "assign"
        and e.attr == "lr"
        and e.recv is not None
        and e.recv.kind == "param_group"
    ]
    if groups:
        _hand_written_warmup(rc, groups)
        return
    if not scheds and rc.ds is not None:
        return  # a DeepSpeed config may define the scheduler
    if not scheds:
        opt = rc._main_optimizer()
        if opt is None or a.main_backward is None:
            return
        unseen = rc.unreached_calls(
            lambda n: apis.is_scheduler(n) or "schedul" in apis.last(n).lower()
        )
        if unseen:
            rc.warn(f"{unseen[0]}: a scheduler in code the scan did not follow; warmup not decided")
            return
        hidden = rc._opaque_touches({opt.ref}, None) or _optimizer_consumers(rc, opt)
        if hidden:
            rc.warn(
                f"{hidden[0].where}: {hidden[0].name or 'a call'}() gets the optimizer and may "
                "set its learning rate; warmup not decided"
            )
            return
        rc.emit("warmup_steps", 0, opt.where, "constant learning rate: no warmup")
        return
    s = _stepped_scheduler(rc, scheds)
    _scheduler_warmup(rc, s)


def _stepped_scheduler(rc: RuleContext, scheds: list[Obj]) -> Obj:
    """The scheduler the loop steps (the first one built when none is seen stepping)."""
    for e in rc.a.sched_steps:
        o = rc.obj(e.recv)
        if o is not None and o in scheds:
            return o
    return scheds[0]


def _optimizer_consumers(rc: RuleContext, opt: Obj) -> list[Event]:
    """Calls into libraries that get the optimizer and are not known to leave its learning
    rate alone (``create_scheduler_v2(optimizer, ...)``)."""
    out = []
    for e in rc.a.calls():
        if not e.name or e.name.startswith("local:"):
            continue
        if e.recv is not None and e.recv.ref == opt.ref:
            continue  # the optimizer's own methods
        if apis.last(e.name) in apis.OPTIMIZER_CONSUMERS or e.method in apis.OPTIMIZER_CONSUMERS:
            continue
        if any(v.ref == opt.ref for v in [*e.args, *e.kwargs.values()] if v.ref is not None):
            out.append(e)
    return out


def _warmup_value(rc: RuleContext, w: Val | None, s: Obj, what: str) -> bool:
    """Emit the warmup a scheduler argument gives; False when it is not decided (with the
    reason as a warning or a command-line-default note)."""
    k = num(w)
    if w is not None and k is not None and V.ARGDEFAULT in w.taint:
        rc.cli_default("warmup_steps", int(k), s.where)
        return False
    if k is not None:
        rc.emit("warmup_steps", int(k), s.where, f"{what}={int(k)}")
        return True
    rc.warn(
        f"{s.where}: warmup length of {what.split('(')[0]} computed at run time or read "
        "from a config; not decided"
    )
    return False


def _scheduler_warmup(rc: RuleContext, s: Obj) -> None:
    n = apis.last(s.canon)
    if (n.startswith("get_") and "warmup" in n) or n == "get_scheduler":
        pos = 2 if n == "get_scheduler" else 1
        w = s.kwargs.get("num_warmup_steps") or (s.args[pos] if len(s.args) > pos else None)
        if w is None and n == "get_scheduler":
            rc.emit("warmup_steps", 0, s.where, "get_scheduler without warmup")
            return
        if w is None or (w.known and w.const is None):
            rc.warn(f"{s.where}: {n} without num_warmup_steps; warmup not decided")
            return
        _warmup_value(rc, w, s, f"{n}(num_warmup_steps")
        return
    if n.startswith("get_") and "schedule" in n:
        rc.emit("warmup_steps", 0, s.where, f"{n} has no warmup")
        return
    if n in apis.SCHEDULER_WARMUP:
        key, place, default = apis.SCHEDULER_WARMUP[n]
        w = s.kwargs.get(key) or (
            s.args[place] if place is not None and len(s.args) > place else None
        )
        if w is None:
            rc.emit("warmup_steps", default, s.where, f"{n} without {key}: no warmup")
            return
        _warmup_value(rc, w, s, f"{n}({key}")
        return
    if n == "LinearLR":
        start_v = s.kwargs.get("start_factor") or (s.args[1] if len(s.args) > 1 else None)
        total = s.kwargs.get("total_iters") or (s.args[3] if len(s.args) > 3 else None)
        start = 1 / 3 if start_v is None else num(start_v)
        k = num(total) if total is not None else 5.0
        if (
            start is None
            or k is None
            or (any(v is not None and V.ARGDEFAULT in v.taint for v in (start_v, total)))
        ):
            rc.warn(f"{s.where}: LinearLR factors not constant; warmup not decided")
            return
        if start < 1:
            rc.emit("warmup_steps", int(k), s.where, f"LinearLR warmup over {int(k)} steps")
        else:
            rc.emit("warmup_steps", 0, s.where, "LinearLR does not start below the base rate")
        return
    if n == "LambdaLR":
        fn = s.kwargs.get("lr_lambda") or (s.args[1] if len(s.args) > 1 else None)
        if fn is not None and V.PICKED in fn.taint:
            # ``lr_fn = lambda s: 1.0`` or ``partial(cosine, warmup=...)`` by a config key:
            # the function read is one of several, and the others may ramp up
            rc.warn(
                f"{s.where}: LambdaLR's function is one of several an if picks; warmup not decided"
            )
            return
        found = _warmup_in_function(rc, fn)
        if found is not None and found[1]:
            rc.cli_default("warmup_steps", found[0], s.where)
        elif found is not None:
            k = found[0]
            rc.emit(
                "warmup_steps",
                k,
                s.where,
                f"LambdaLR warmup over {k} steps" if k else "LambdaLR without warmup",
            )
        else:
            rc.warn(f"{s.where}: LambdaLR warmup not readable")
        return
    if n in apis.NO_WARMUP_SCHEDULERS:
        rc.emit("warmup_steps", 0, s.where, f"{n} has no warmup")
        return
    rc.warn(
        f"{s.where}: scheduler {n or 'of unknown kind'} is built by code the scan does not "
        "read (a factory, a config, a project class); warmup not decided"
    )


def _hand_written_warmup(rc: RuleContext, groups: list[Event]) -> None:
    """``param_group["lr"] = f(step)``: the warmup is whatever ``f`` ramps over. ``f`` is a
    function that runs on each optimizer step before the assignment: one the step loop calls
    (nanoGPT's ``lr = get_lr(it)``) or one the assignment runs inside (open_clip's
    ``scheduler(step)``, a closure over the warmup length, calling ``assign_learning_rate``).
    A function with "lr" in its name that runs once at set-up (a layer-decay table) is not the
    schedule. A warmup length that is a command-line default is not a fact."""
    a = rc.a
    step = a.main_step or (a.opt_steps[0] if a.opt_steps else None)
    loops = [c for c in step.ctx if isinstance(c, LoopCtx)] if step is not None else []

    def per_step(e: Event) -> bool:
        return any(c is lp for c in e.ctx for lp in loops)

    in_step = [g for g in groups if per_step(g)]
    target = in_step or groups
    first = target[0]
    candidates: list[tuple[FuncRef, str]] = []
    after_loop = False  # only functions the step runs the assignment inside
    for c in first.ctx:
        if any(c is lp for lp in loops):
            after_loop = True
        elif after_loop and isinstance(c, FuncCtx):
            ref = _function_at(rc, c.file, c.line)
            if ref is not None:
                candidates.append((ref, c.call_where or first.where))
    # the outermost (the one the step calls) may hold no test at all: a schedule without
    # warmup; the helpers it calls to write the rate (``set_lr(opt, value)``) are not schedules
    flat_ok = {id(candidates[0][0])} if candidates else set()
    candidates.reverse()  # the innermost function first
    for e in a.calls():
        if (
            e.result is None
            or not e.name.startswith("local:")
            or e.seq > first.seq
            or "lr" not in e.name.lower()
        ):
            continue
        if in_step and not per_step(e):
            continue  # runs once, at set-up: not what each step's rate comes from
        ref = None
        for fr in rc.walk.functions:
            if f"local:{fr.name}" == e.name:
                ref = fr
        if ref is not None:
            candidates.append((ref, e.where))
            flat_ok.add(id(ref))
    found: tuple[int, bool, str] | None = None
    for flat in (False, True):  # a ramp anywhere first; "no test, no warmup" only then
        for ref, at in candidates:
            if flat and id(ref) not in flat_ok:
                continue
            got = _warmup_in_function(rc, Val(kind=V.FUNCTION, const=ref), flat=flat)
            if got is not None:
                found = (*got, at)
                break
        if found is not None:
            break
    if found is not None:
        k, default, where = found
        if default:
            rc.cli_default("warmup_steps", k, where)
        else:
            rc.emit("warmup_steps", k, where, f"learning-rate function with {k} warmup steps")
        return
    rc.warn(f"{first.where}: learning rate set by hand each step; warmup not decided")


def _function_at(rc: RuleContext, file: str, line: int) -> FuncRef | None:
    """The function defined at ``file:line`` (the last closure made of it)."""
    out = None
    for fr in rc.walk.functions:
        if fr.scope.module.label == file and getattr(fr.node, "lineno", None) == line:
            out = fr
    return out


def _warmup_in_function(
    rc: RuleContext, fn: Val | None, flat: bool = True
) -> tuple[int, bool] | None:
    """The warmup steps a schedule function ramps over, and whether that length is only a
    command-line default; None when the function does not show it. ``flat``: a function with
    no test at all is a schedule without warmup (0)."""
    if fn is None or not isinstance(fn.const, FuncRef):
        return None
    ref = fn.const
    node = ref.node
    params = [p.arg for p in node.args.args]
    if params and ref.owner is not None and params[0] in ("self", "cls"):
        params = params[1:]  # a method: its step is the first argument after the instance
    if not params:
        return None
    # the step is the first parameter, or a later one named for a counter
    # (``adjust_lr(opt, step, world)``, ``set_rate(args, optimizer, loader, step)``)
    steps = {params[0], *(p for p in params[1:] if _STEP_NAME.search(p))}
    scope = ref.scope
    for sub in ast.walk(node):
        bound: ast.expr | None = None
        if (
            isinstance(sub, ast.Compare)
            and len(sub.ops) == 1
            and isinstance(sub.ops[0], (ast.Lt, ast.LtE))
            and isinstance(sub.left, ast.Name)
            and sub.left.id in steps
        ):
            bound = sub.comparators[0]
        if isinstance(sub, ast.Call) and text(sub.func) in ("min",) and len(sub.args) == 2:
            for arg in sub.args:
                if (
                    isinstance(arg, ast.BinOp)
                    and isinstance(arg.op, ast.Div)
                    and steps & {n.id for n in ast.walk(arg.left) if isinstance(n, ast.Name)}
                ):
                    bound = arg.right
        if bound is None:
            continue
        value = _resolve_in(rc, bound, ref, scope)
        if value is not None:
            return int(value[0]), value[1]
    if (
        flat
        and not any(isinstance(s, (ast.Compare, ast.If, ast.IfExp)) for s in ast.walk(node))
        and not any(
            isinstance(s, ast.Call) and text(s.func) in ("min", "max") for s in ast.walk(node)
        )
        and not any(_hands_on_step(node, step) for step in params)
    ):
        return 0, False
    return None


_STEP_NAME = re.compile(r"step|iter|^it$|epoch", re.I)


_RATE_MATH = ("math.", "torch.", "np.", "numpy.")
_RATE_BUILTINS = {"min", "max", "float", "int", "abs", "round", "pow"}


def _hands_on_step(node: ast.AST, step: str) -> bool:
    """The function passes its step to another function (``return self.lr_func(it)``, a
    rate function picked at set-up): that one decides the ramp, so no test here does not
    mean no warmup. Arithmetic helpers (``math.cos``, ``min``) do not count."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        name = text(sub.func)
        if name in _RATE_BUILTINS or name.startswith(_RATE_MATH):
            continue
        for arg in [*sub.args, *(k.value for k in sub.keywords)]:
            if any(isinstance(n, ast.Name) and n.id == step for n in ast.walk(arg)):
                return True
    return False


def _resolve_in(
    rc: RuleContext, node: ast.expr, ref: FuncRef, scope: object
) -> tuple[float, bool] | None:
    """The value of ``node`` inside the function (its constants, its closure, its module), and
    whether a command-line default went into it."""
    frame = ref.closure
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    env: dict[str, object] = {}
    default = False
    local = function_constants(ref.node)
    for name in names:
        if name in local:
            env[name] = local[name]
            continue
        val: Val | None = None
        f = frame
        while f is not None and val is None:
            val = f.locals.get(name)
            f = f.parent
        if val is None:
            val = ref.scope.globals.get(name)
        if val is None or not val.known:
            if isinstance(node, ast.Attribute):
                break
            return None
        default = default or V.ARGDEFAULT in val.taint
        env[name] = val.const
    from ddpadvisor.scan.evaluate import Undecidable, evaluate

    try:
        out = evaluate(node, env)
    except Undecidable:
        return None
    if isinstance(out, (int, float)) and not isinstance(out, bool):
        return float(out), default
    return None


def _sched_ratio(rc: RuleContext) -> None:
    a = rc.a
    steps = a.sched_steps
    if not steps:
        return
    acc = a.accum
    s = steps[0]
    if acc.step is not None:
        step_ctx = acc.step.ctx
        s = max(steps, key=lambda e: (len(common_prefix(e.ctx, step_ctx)), -e.seq))
    sched = rc.obj(s.recv)
    name = apis.last(sched.canon) if sched else ""
    if acc.style == "framework":
        # accelerate's prepared scheduler skips the micro-steps, but on a real step it steps
        # the wrapped scheduler num_processes times unless split_batches is set
        # (https://github.com/huggingface/accelerate/blob/main/src/accelerate/scheduler.py):
        # scripts multiply their schedule lengths by the world size to match, so the count
        # per optimizer step is the world size, not a constant the code shows
        rc.warn(
            f"{s.where}: accelerate steps a prepared scheduler once per process on each "
            "optimizer step (split_batches=False); scheduler steps per optimizer step not decided"
        )
        return
    win = a.window
    if win is None or acc.step is None:
        return
    if not a.in_window(s, win):
        step_loops = acc.step.loops()
        if step_loops and s.loops() and s.loops()[-1] is step_loops[-1]:
            rc.emit(
                "scheduler_steps_per_optimizer_step",
                1.0,
                s.where,
                "scheduler stepped next to optimizer.step()",
            )
            _total_steps(rc, sched)
            return
        if name in apis.EPOCH_SCHEDULERS:
            return
        rc.warn(f"{s.where}: scheduler stepped outside the training step loop (per epoch?)")
        return
    if acc.style == "modulo" and acc.k_default and (acc.k or 0) < 2:
        _sched_ratio_by_structure(rc, s, sched)
        return
    # every step of this scheduler in the window counts (one beside optimizer.step() and
    # another on the micro-batches that skip it step it twice as often as either alone)
    same = [
        e
        for e in steps
        if a.in_window(e, win)
        and (e is s or (e.recv is not None and s.recv is not None and e.recv.ref == s.recv.ref))
    ]
    runs = [
        a.runs_at(e, i, win, guarded=_guarded_with_step(e, acc.step, win.var))
        for e in same
        for i in win.indices
    ]
    step_runs = (
        [a.runs_at(acc.step, i, win) for i in win.indices] if a.in_window(acc.step, win) else None
    )
    if any(r is None for r in runs):
        return
    n_sched = sum(1 for r in runs if r)
    if acc.style == "inner":
        n_opt = 1
        n_sched_window = n_sched
    else:
        n_opt = sum(1 for r in (step_runs or []) if r) or len(win.boundaries)
        n_sched_window = n_sched
    if n_opt == 0:
        return
    ratio = n_sched_window / n_opt
    if acc.k is None and ratio > 1.05:
        given = rc.given_number("grad_accum_steps")
        if given is not None and acc.k_node is not None and abs(ratio - win.k) < 0.05:
            # stepped on every micro-batch of a window whose count the code leaves open (an
            # option, a derived value): k per optimizer step, k as the run gives it
            rc.emit(
                "scheduler_steps_per_optimizer_step",
                float(given),
                s.where,
                f"scheduler.step() on every micro-batch ({s.where}), {given:g} per optimizer "
                "step as the run accumulates",
            )
            return
        rc.warn(f"{s.where}: scheduler stepped on every micro-batch; accumulation count unknown")
        return
    if ratio > 1.05 and acc.k_default:
        rc.cli_default("scheduler_steps_per_optimizer_step", float(acc.k or ratio), s.where)
    elif ratio > 1.05:
        rc.emit(
            "scheduler_steps_per_optimizer_step",
            float(acc.k or ratio),
            s.where,
            f"scheduler.step() on every micro-batch ({s.where}): warmup and decay run {acc.k}x too fast",
        )
    else:
        rc.emit(
            "scheduler_steps_per_optimizer_step",
            round(ratio, 3),
            s.where,
            "scheduler stepped once per optimizer step",
        )
    _total_steps(rc, sched)


def _guarded_with_step(e: Event, step: Event, var: str | None) -> bool:
    """Every undecided ``if`` around ``e`` that does not test the micro-step also holds
    around optimizer.step() (``if not layer_wise: optimizer.step(); scheduler.step()``): in
    the configuration where the optimizer steps there, so does the scheduler."""
    from ddpadvisor.scan.evaluate import free_names

    around_step = {id(c) for c in step.ctx}
    for c in e.ctx:
        if not isinstance(c, CondCtx) or c.const is not None or id(c) in around_step:
            continue
        if var is None or var not in free_names(c.test):
            return False
    return True


def _sched_ratio_by_structure(rc: RuleContext, s: Event, sched: Obj | None) -> None:
    """The accumulation count is only a default of 1, so simulating the window says nothing:
    a scheduler step under the ``if`` that steps the optimizer runs once per optimizer step,
    one outside it on every micro-batch, that is ``k`` times per step for the run's ``k``
    (given by other evidence, else unknown)."""
    guard = rc.a.accum.boundary
    if guard is None:
        return
    if any(c is guard for c in s.ctx):
        rc.emit(
            "scheduler_steps_per_optimizer_step",
            1.0,
            s.where,
            "scheduler stepped with the optimizer, under the same condition",
        )
        _total_steps(rc, sched)
        return
    k = rc.given_number("grad_accum_steps")
    if k is None:
        rc.warn(
            f"{s.where}: scheduler.step() runs on every micro-batch, outside the step's "
            f"condition ({guard.file}:{guard.line}); steps per optimizer step = the run's "
            "accumulation count, which only a command-line default gives"
        )
        return
    rc.emit(
        "scheduler_steps_per_optimizer_step",
        float(k),
        s.where,
        f"scheduler.step() on every micro-batch ({s.where}), {k:g} per optimizer step",
    )


def _total_steps(rc: RuleContext, sched: Obj | None) -> None:
    if sched is None:
        return
    for key in ("num_training_steps", "total_steps", "T_max", "total_iters"):
        val = sched.kwargs.get(key)
        if val is not None and V.LEN_DATASET in val.taint and V.WORLD not in val.taint:
            rc.warn(
                f"{sched.where}: {key} computed from len(dataset): with DistributedSampler each rank "
                "sees len(dataset)/world_size samples, so the schedule never finishes"
            )
