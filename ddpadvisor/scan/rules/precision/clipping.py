from __future__ import annotations

import ast

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.context import CondCtx, Event
from ddpadvisor.scan.library.views import SCRIPT, Clipping
from ddpadvisor.scan.rules.base import RuleContext, exclusive, is_rank_cond, may_not_run
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, not_in_excerpt, rule
from ddpadvisor.scan.values import Val

# Keywords that hand a clipping threshold to a helper the scan does not read (a loss-scaler
# wrapper's ``clip_grad=``, a framework's ``max_norm=``): the helper clips when it is set.
TORCH_CLIPS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_grads_with_norm_")


CLIP_KEYWORDS = ("clip_grad", "max_norm", "max_grad_norm", "clip_value", "grad_clip", "clip_norm")


def _clip_named(e: Event) -> bool:
    """A call that clips by its name: torch's clip_grad_norm_/clip_grad_value_, a wrapper's or
    framework's own (``fabric.clip_gradients``, ``accelerator.clip_grad_norm_``, timm's
    ``dispatch_clip_grad``)."""
    low = apis.last(e.name).lower() or (e.method or "").lower()
    return "clip" in low and "grad" in low


def _clip_threshold(e: Event) -> Val | None:
    """The threshold a clipping call or a helper's keyword passes, when it passes one."""
    for key in CLIP_KEYWORDS:
        if key in e.kwargs:
            return e.kwargs[key]
    return None


_THRESHOLD_PARAMS = ("clip", "max_norm", "threshold", "max_value")


def _project_threshold(rc: RuleContext, e: Event) -> Val | None:
    """What a clip-named function of the project's own gets as its threshold: the argument
    bound to its parameter named for one (``def clip_grad_value_(parameters, clip_value)``
    called with None clips nothing and only measures the norm)."""
    if not e.name.startswith("local:") or not _clip_named(e):
        return None
    name = apis.last(e.name.removeprefix("local:"))
    defs = [
        f.node
        for f in rc.walk.functions
        if f.name == name and isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    if len({ast.dump(d.args) for d in defs}) != 1:
        return None
    args = defs[0].args
    params = [*args.posonlyargs, *args.args]
    if params and params[0].arg in ("self", "cls"):
        params = params[1:]
    defaults = dict(zip([p.arg for p in params][len(params) - len(args.defaults) :], args.defaults))
    for i, p in enumerate(params):
        if not any(k in p.arg.lower() for k in _THRESHOLD_PARAMS):
            continue
        if i < len(e.args):
            return e.args[i]
        if p.arg in e.kwargs:
            return e.kwargs[p.arg]
        default = defaults.get(p.arg)
        if isinstance(default, ast.Constant):
            return Val(const=default.value)
        return None
    return None


def _clip_events(rc: RuleContext) -> list[Event]:
    """Calls that clip: named for it, or a call into code the scan does not read that gets a
    clipping threshold (``loss_scaler(loss, opt, clip_grad=args.clip_grad)``); a threshold
    written as None is no clipping."""
    out = []
    for e in rc.a.calls():
        threshold = _clip_threshold(e)
        if threshold is None:
            threshold = _project_threshold(rc, e)
        if (
            threshold is not None
            and threshold.known
            and threshold.const is None
            and V.ARGDEFAULT not in threshold.taint
        ):
            continue
        opaque_helper = (
            threshold is not None
            and bool(e.name)
            and not e.name.startswith(("local:", "."))
            and apis.last(e.name)[:1].islower()
        )
        if _clip_named(e) or opaque_helper:
            out.append(e)
    return out


@rule(
    "Whether gradients are clipped, inside no_sync(), and after the scaler unscales them.",
    facts={
        "uses_grad_clipping": not_in_excerpt(False),
        "clip_inside_no_sync": not_in_excerpt(False),  # False also when no no_sync() is seen
        "unscale_before_clip": ANY_EXCERPT,
    },
    shown_with={"clip_inside_no_sync": "uses_no_sync"},
)
def clipping(rc: RuleContext) -> None:
    a = rc.a
    fw = rc.framework
    said = fw.clipping() if fw is not None else SCRIPT
    if isinstance(said, Clipping):
        rc.say("uses_grad_clipping", said.clips)
        rc.say("unscale_before_clip", said.unscales_first)
        rc.say("clip_inside_no_sync", said.inside_no_sync)
        return
    clips = _clip_events(rc)
    step = a.main_step
    if not clips and rc.ds is not None:
        return  # gradient_clipping lives in the DeepSpeed config
    if not clips:
        opt = rc._main_optimizer()
        refs = {r for o in a.ddps for r in (o.ref, o.wraps)} | {opt.ref if opt else None}
        hidden = rc._opaque_touches(refs, a.step_loop)
        if hidden:
            rc.warn(
                f"{hidden[0].where}: {hidden[0].name}() gets the model or optimizer; clipping not decided"
            )
            return
        unseen = rc.unreached_calls(
            lambda n: "clip" in apis.last(n).lower() and "grad" in apis.last(n).lower()
        )
        if unseen:
            rc.warn(f"{unseen[0]}: gradient clipping in code the scan did not follow; not decided")
            return
        if opt is not None and _optimizer_clips(rc, opt):
            return
        if a.main_backward is not None and step is not None:
            rc.emit(
                "uses_grad_clipping",
                False,
                step.where,
                f"no gradient clipping before {text(step.node)}",
            )
        return
    clip = clips[0]
    # Whether it clips may hang on a switch; where it clips (before unscale_, inside no_sync)
    # is decided either way, and means something only if it does. A helper or framework call
    # that clips (fabric.clip_gradients, a loss scaler's clip_grad=) unscales as it sees fit.
    torch_clips = [c for c in clips if apis.last(c.name) in TORCH_CLIPS or c.method in TORCH_CLIPS]
    if torch_clips and torch_clips[0] is clip:
        _unscale(rc, torch_clips)
    _clip_local(rc, clip)
    for c in clip.conds():
        if c.const is not None:  # a command-line switch: only its default is known
            rc.cli_default("uses_grad_clipping", bool(c.const) == c.branch, clip.where)
            return
        if c.const is None and not is_rank_cond(c) and not _structural(rc, c):
            rc.warn(f"{clip.where}: clipping runs only when {text(c.test)}; not decided")
            return
    threshold = _clip_threshold(clip)
    if threshold is None:
        threshold = _project_threshold(rc, clip)
    if threshold is not None and V.ARGDEFAULT in threshold.taint and threshold.known:
        on = threshold.const is not None and threshold.const is not False and threshold.const != 0
        rc.cli_default("uses_grad_clipping", on, clip.where)
        return
    if threshold is not None and not threshold.known and not _clip_named(clip):
        rc.warn(f"{clip.where}: {clip.name}() clips when its threshold is set; not decided")
        return
    rc.emit("uses_grad_clipping", True, clip.where, f"gradients clipped ({clip.where})")


def _optimizer_clips(rc: RuleContext, opt: V.Obj) -> bool:
    """An optimizer built with a clipping keyword (``ScaledAdam(..., clipping_scale=2.0)``,
    an Adafactor's ``clip_threshold``) clips inside its own ``step``, which the walk does not
    read when ``scaler.step(opt)`` or a library runs it. True when that decided the fact (or
    left it open with a warning)."""
    keys = [k for k in opt.kwargs if "clip" in k.lower()]
    if not keys:
        return False
    val = opt.kwargs[keys[0]]
    if val.known and V.ARGDEFAULT in val.taint:
        on = val.const is not None and val.const is not False and val.const != 0
        rc.cli_default("uses_grad_clipping", on, opt.where)
        return True
    if not val.known:
        rc.warn(f"{opt.where}: the optimizer clips when its {keys[0]} is set; not decided")
        return True
    if val.const is None or val.const is False or val.const == 0:
        return False
    rc.emit(
        "uses_grad_clipping",
        True,
        opt.where,
        f"the optimizer clips in its step ({keys[0]}={val.const!r})",
    )
    return True


def _structural(rc: RuleContext, c: CondCtx) -> bool:
    """A condition of the accumulation window (micro-step index), not a config switch."""
    if _is_accum_cond(rc, c):
        return True
    win = rc.a.window
    if win is None or win.var is None:
        return False
    from ddpadvisor.scan.evaluate import free_names

    return win.var in free_names(c.test)


def _is_accum_cond(rc: RuleContext, c: CondCtx) -> bool:
    b = rc.a.accum.boundary
    return b is not None and c.node is b.node


def _unscale(rc: RuleContext, clips: list[Event]) -> None:
    """``unscale_before_clip`` over every torch clip the walk read: two train-step functions
    picked by a test the scan cannot decide (one with a scaler that unscales first, one
    without a scaler) are alternatives, and when their clips say different things the fact
    is not decided."""
    pairs = [(c, v) for c in clips if (v := _unscale_at(rc, c)) is not None]
    verdicts = [v for _, v in pairs]
    if not verdicts:
        return
    scaled = [c for c, v in pairs if not v[0]]
    unscaled = [c for c, v in pairs if v[0]]
    if scaled and unscaled and not any(_opposite_paths(x, y) for x in scaled for y in unscaled):
        # both clips run in the same step (a GAN's two models): the one on gradients still
        # scaled is a clip before unscale, whatever the other does
        value, where, detail = next(v for _, v in pairs if not v[0])
        rc.emit("unscale_before_clip", value, where, detail)
        return
    if len({v[0] for v in verdicts}) > 1:
        yes = next(v for v in verdicts if v[0])
        no = next(v for v in verdicts if not v[0])
        rc.warn(
            f"{no[1]}: clips without unscale_() where {yes[1]} unscales first; the run's "
            "options pick between them, so unscale_before_clip is not decided"
        )
        return
    value, where, detail = verdicts[0]
    rc.emit("unscale_before_clip", value, where, detail)


def _unscale_at(rc: RuleContext, clip: Event) -> tuple[bool, str, str] | None:
    a = rc.a
    if clip.recv is not None and clip.recv.kind == V.ACCELERATOR:
        return True, clip.where, "accelerator.clip_grad_norm_() unscales first"
    scalers = a.objs(V.SCALER)
    # a scaler made elsewhere (a parameter, self.scaler) that scales this loss: if it is
    # enabled at all, the gradients it leaves are scaled until unscale_()
    scaled_elsewhere = any(
        e.recv is not None and e.recv.kind == V.SCALER and e.seq < clip.seq
        for e in a.calls("scale")
    )
    if not scalers and not scaled_elsewhere:
        return None
    scales = [e for e in a.calls("scale") if e.recv is not None and e.recv.kind == V.SCALER]
    if scales and all(_opposite_paths(e, clip) for e in scales):
        return None  # the path that clips here scales no loss (the run without a scaler)
    enabled = scalers[0].kwargs.get("enabled") if scalers else None
    if (
        enabled is not None
        and enabled.known
        and enabled.const is False
        and V.ARGDEFAULT not in enabled.taint
    ):
        return None
    unscales = [
        e
        for e in a.calls("unscale_")
        if e.seq < clip.seq and not _opposite_paths(e, clip) and not _other_model(rc, e, clip)
    ]
    if unscales:
        return True, unscales[-1].where, "scaler.unscale_() before clipping"
    return (
        False,
        clip.where,
        f"clip_grad_norm_ on scaled gradients: no scaler.unscale_() before it ({clip.where})",
    )


def _model_of(rc: RuleContext, val: Val | None) -> int | None:
    """The model whose parameters ``val`` holds (a wrapper stands for the model it wraps)."""
    if val is None or val.kind != V.PARAMS or val.ref is None:
        return None
    obj = rc.obj(val)
    if obj is not None and obj.wraps is not None:
        return obj.wraps
    return val.ref


def _other_model(rc: RuleContext, unscale: Event, clip: Event) -> bool:
    """``scaler.unscale_(opt_d)`` then a clip of another model's parameters (a GAN's
    generator after its discriminator): that unscale_ left the clipped gradients scaled."""
    opt = rc.obj(unscale.args[0]) if unscale.args else None
    if opt is None or not clip.args:
        return False
    held = opt.kwargs.get("params") or (opt.args[0] if opt.args else None)
    mine, clipped = _model_of(rc, held), _model_of(rc, clip.args[0])
    return mine is not None and clipped is not None and mine != clipped


def _opposite_paths(a: Event, b: Event) -> bool:
    """The two events sit on opposite sides of one ``if``, or of two ``if``s with the same
    test (``if scaler is not None:`` in the backward helper and again in the step helper)."""
    if exclusive(a, b):
        return True
    tests = {(ast.dump(c.test), c.branch) for c in a.ctx if isinstance(c, CondCtx)}
    return any((ast.dump(c.test), not c.branch) in tests for c in b.ctx if isinstance(c, CondCtx))


def _clip_local(rc: RuleContext, clip: Event) -> None:
    a = rc.a
    fact = "clip_inside_no_sync"
    # FSDP2's ``fully_shard`` keeps gradients as DTensors, whose norm torch.nn.utils
    # reduces across shards (https://github.com/meta-pytorch/torchtune/issues/2169); FSDP1's
    # flat shards need the wrapper's own clip_grad_norm_. ZeroRedundancyOptimizer shards only
    # the optimizer state: DDP still all-reduces whole gradients, so the plain clip is right.
    # https://pytorch.org/docs/stable/distributed.optim.html
    shards = [o for o in a.fsdps if apis.last(o.canon) != "fully_shard"] + [
        o for o in a.objects.values() if o.extra.get("deepspeed")
    ]
    made = [a.by_seq.get(o.seq) for o in shards]
    sharded = any(e is None or not may_not_run(rc, e) for e in made)
    if shards and not sharded and clip.name.startswith("torch.nn.utils"):
        # ``if args.engine == "fsdp": model = FSDP(model)`` beside a plain DDP wrap: whether
        # the gradients torch's clip measures are shards is the run's choice
        where = next((e.where for e in made if e is not None), clip.where)
        rc.warn(f"{where}: gradients sharded only under an option; clipping on shards not decided")
        return
    if sharded and clip.name.startswith("torch.nn.utils"):
        rc.emit(
            fact,
            True,
            clip.where,
            "torch.nn.utils.clip_grad_norm_ on sharded gradients measures a shard's norm",
        )
        return
    if any(w.kind == V.CTX_NO_SYNC and w.cond is None for w in clip.withs()):
        rc.emit(
            fact,
            True,
            clip.where,
            f"clip_grad_norm_ inside no_sync() ({clip.where}): ranks clip local gradients",
        )
        return
    win = a.window
    uses_no_sync = bool(a.calls("no_sync") or a.flag_events)
    if win is not None and uses_no_sync and a.in_window(clip, win):
        fwds = [f for f in a.train_forwards if a.in_window(f, win) and f.seq < clip.seq]
        for i in win.indices:
            if a.runs_at(clip, i, win) is not True:
                continue
            for f in fwds:
                if a.runs_at(f, i, win) and a.synced_at(f, i, win)[0] is False:
                    rc.emit(
                        fact,
                        True,
                        clip.where,
                        f"clip_grad_norm_ runs on micro-steps that skip gradient sync ({clip.where})",
                    )
                    return
    rc.emit(fact, False, clip.where, "clipping after the synchronising backward")
