from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext, is_rank_cond
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule


def _compiles_a_function(e: Event) -> bool:
    """``@torch.compile(dynamic=True)`` on a helper or ``torch.compile(fn)``: it compiles that
    function, not the model (a project's loss or log-softmax kernel)."""
    if not e.args:
        return True  # the decorator form: it compiles the function defined below it
    return e.args[0].kind in (V.FUNCTION, V.LAMBDA, "method")


@rule(
    "Whether the model is compiled with torch.compile.",
    facts={
        "uses_torch_compile": not_in_excerpt(False),
    },
)
def compile(rc: RuleContext) -> None:
    fact = "uses_torch_compile"
    fw = rc.framework
    said = fw.compiles() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    compiles = [
        e
        for e in rc.a.calls()
        if (
            apis.last(e.name) == "compile"
            and e.name.startswith("torch")
            and not _compiles_a_function(e)
        )
        or (e.method == "compile" and e.recv is not None and e.recv.kind in (V.MODEL, V.DDP))
        # a wrapper's own compile (timm's ``task.compile(backend=...)``) on an object the
        # scan does not know: not a regex or a symbol of another library
        or (
            e.method == "compile"
            and e.recv is not None
            and e.recv.kind in (None, V.INSTANCE)
            and e.name.split(".")[0] not in ("re", "regex", "jax", "tf", "keras")
            and ("backend" in e.kwargs or "mode" in e.kwargs or "fullgraph" in e.kwargs)
        )
    ]
    if not compiles:
        hidden = rc.unreached_calls(lambda n: n in ("torch.compile", "compile"))
        if hidden:
            rc.warn(f"{hidden[0]}: torch.compile in code the scan did not follow; not decided")
            return
        if rc.a.main_backward is not None:
            where = rc.a.ddps[0].where if rc.a.ddps else rc.a.main_backward.where
            rc.emit(fact, False, where, "torch.compile is not used")
        return
    c = compiles[0]
    for cond in c.conds():
        if cond.const is not None:  # a command-line switch: only its default is known
            rc.cli_default(fact, bool(cond.const) == cond.branch, c.where)
            return
        if cond.const is None and not is_rank_cond(cond):
            rc.warn(f"{c.where}: torch.compile only when {text(cond.test)}; not decided")
            return
    order = ""
    target = c.args[0] if c.args else c.recv
    if target is not None and target.kind == V.DDP:
        order = "; compiles the DDP-wrapped model"
    elif rc.a.ddps:
        first = rc.a.ddps[0]
        order = (
            "; compiled before DDP wraps it"
            if c.seq < first.seq
            else "; compiled after the DDP wrap"
        )
    rc.emit(fact, True, c.where, f"torch.compile used ({c.where}){order}")
