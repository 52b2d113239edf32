from __future__ import annotations

import ast

from ddpadvisor.scan import values as V
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext, num
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule


@rule(
    "The per-GPU batch size of the training loader.",
    facts={
        "per_gpu_batch_size": ANY_EXCERPT,
    },
)
def batch_size(rc: RuleContext) -> None:
    fw = rc.framework
    said = fw.per_device_batch() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say("per_gpu_batch_size", said)
        return
    loader = rc.training_loader()
    if loader is None:
        return
    bs = loader.kwargs.get("batch_size")
    if bs is None:
        node = loader.node
        spread = isinstance(node, ast.Call) and any(k.arg is None for k in node.keywords)
        # ``DataLoader(ds, **kwargs)``: a dict filled item by item (kwargs["batch_sampler"] =
        # …) may hold what the scan did not track, so the default is not known to apply.
        if loader.kwargs.get("batch_sampler") is None and not spread:
            rc.emit("per_gpu_batch_size", 1, loader.where, "DataLoader default batch_size=1")
        return
    n = num(bs)
    if n is not None and V.ARGDEFAULT in bs.taint:
        rc.cli_default("per_gpu_batch_size", int(n), loader.where)
    elif n is not None and V.WORLD not in bs.taint:
        rc.emit(
            "per_gpu_batch_size",
            int(n),
            loader.where,
            f"DataLoader(batch_size={int(n)}) per rank",
        )
