"""Names and small helpers the symbol table and the method calls share."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.evaluate import Undecidable, evaluate
from ddpadvisor.scan.interp.frames import Frame
from ddpadvisor.scan.values import Val, merge

if TYPE_CHECKING:
    from ddpadvisor.scan.interp.core import WalkerCore as Walker

TORCHISH = ("torch", "nn", "dist", "F", "optim", "xm", "amp")
TRAINING_ARGS = {
    "TrainingArguments",
    "Seq2SeqTrainingArguments",
    "SFTConfig",
    "DPOConfig",
    "RewardConfig",
    "ORPOConfig",
    "KTOConfig",
    "GRPOConfig",
}
FUNCTIONAL_LOSSES = {
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "cosine_embedding_loss",
    "margin_ranking_loss",
}
DATASETS = {
    "TensorDataset",
    "ImageFolder",
    "DatasetFolder",
    "Subset",
    "ConcatDataset",
    "load_dataset",
    "load_from_disk",
    "from_dict",
    "from_list",
    "from_generator",
    "from_pandas",
    "concatenate_datasets",
    "interleave_datasets",
}
TENSOR_SAME = {
    "item",
    "detach",
    "cpu",
    "cuda",
    "float",
    "double",
    "half",
    "clone",
    "to",
    "view",
    "reshape",
    "squeeze",
    "unsqueeze",
    "contiguous",
    "tolist",
    "numpy",
    "flatten",
    "view_as",
    "type_as",
    "requires_grad_",
    "nan_to_num",
}


def const(v: Val | None) -> object:
    return v.const if v is not None and v.known else None


def args_named(ev: Event, names: list[str]) -> dict[str, Val]:
    out = dict(ev.kwargs)
    for i, name in enumerate(names):
        if i < len(ev.args) and name not in out:
            out[name] = ev.args[i]
    return out


def fold(canon: str, ev: Event) -> Val:
    """Pure builtins on known constants (``int("4")``, ``max(1, n)``)."""
    base = merge(*ev.args, *ev.kwargs.values())
    if ev.args and all(a.known for a in ev.args) and not ev.kwargs:
        name = apis.last(canon)
        try:
            if name in (
                "int",
                "float",
                "bool",
                "abs",
                "round",
                "min",
                "max",
                "sqrt",
                "ceil",
                "floor",
            ):
                call = ast.Call(ast.Name(name), [ast.Constant(a.const) for a in ev.args], [])
                if canon.startswith("math."):
                    call = ast.Call(
                        ast.Attribute(ast.Name("math"), name),
                        [ast.Constant(a.const) for a in ev.args],
                        [],
                    )
                return Val(const=evaluate(call), taint=base.taint)
            if name == "str":
                return Val(const=str(ev.args[0].const), taint=base.taint)
        except Undecidable:
            pass
    return base


def is_nn_class(canon: str, n: str) -> bool:
    if not n[:1].isupper():
        return False
    parts = canon.split(".")
    if canon.startswith("torch.nn.") and not canon.startswith(
        ("torch.nn.parallel", "torch.nn.utils", "torch.nn.functional")
    ):
        return True
    # ``from torch import nn`` / ``import torch.nn as nn``: the alias resolves to torch.nn.*;
    # a bare ``nn.X`` (unresolved) is accepted too.
    return len(parts) == 2 and parts[0] == "nn"


def wrap(w: Walker, ev: Event, frame: Frame, canon: str, inner: Val, kind: str) -> Val:
    node = ev.node
    inner_obj = w.obj(inner)
    if inner_obj is None:
        inner_obj = w.new_obj(V.MODEL, node, frame, canon="unknown-model")
    kw = args_named(ev, ["module", "device_ids", "output_device", "dim", "broadcast_buffers"])
    obj = w.new_obj(
        kind, node, frame, canon=canon, kwargs=kw, args=list(ev.args), wraps=inner_obj.ref
    )
    if inner_obj.wrapped_by is None:
        inner_obj.wrapped_by = obj.ref
    return Val(kind=kind, ref=obj.ref)


def autocast(canon: str, ev: Event) -> Val:
    dtype_val = ev.kwargs.get("dtype")
    if (
        dtype_val is None
        and "amp.autocast" in canon
        and canon.startswith("torch.")
        and len(ev.args) >= 2
    ):
        dtype_val = ev.args[1]
    dtype: str | None = None
    if dtype_val is not None:
        dtype = apis.dtype_of(
            dtype_val.canon or (str(dtype_val.const) if dtype_val.known else None)
        )
        if dtype is None or V.ARGDEFAULT in dtype_val.taint:
            dtype = "unknown"  # a default that a config or the command line may override
    elif "cuda.amp" in canon:
        dtype = "fp16"
    elif "cpu.amp" in canon:
        dtype = "bf16"
    else:
        device = ev.kwargs.get("device_type") or (ev.args[0] if ev.args else None)
        if device is not None and device.known:
            dtype = (
                "bf16" if device.const == "cpu" else "fp16" if device.const == "cuda" else "unknown"
            )
        else:
            dtype = "unknown"
    enabled = ev.kwargs.get("enabled")
    state = "on"
    if enabled is not None:
        if enabled.known and V.ARGDEFAULT not in enabled.taint:
            state = "on" if enabled.const else "off"
        else:
            state = "maybe"
    return Val(kind=V.CTX_AUTOCAST, const=(dtype, state))
