"""What calls into PyTorch / HF libraries return, as abstract values.

Kept apart from :mod:`.interp` to keep the interpreter readable: ``symbol_call`` handles calls of
imported names (``torch.optim.AdamW(...)``), ``method_call`` handles methods on objects the
script built (``optimizer.step()``, ``accelerator.prepare(...)``).
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Ctx, Event
from ddpadvisor.scan.evaluate import Undecidable, evaluate
from ddpadvisor.scan.interp.frames import ClassInfo, Frame, FuncRef
from ddpadvisor.scan.values import UNKNOWN, Val, merge

if TYPE_CHECKING:
    from ddpadvisor.scan.interp.core import WalkerCore as Walker

_TORCHISH = ("torch", "nn", "dist", "F", "optim", "xm", "amp")
_TRAINING_ARGS = {
    "TrainingArguments",
    "Seq2SeqTrainingArguments",
    "SFTConfig",
    "DPOConfig",
    "RewardConfig",
    "ORPOConfig",
    "KTOConfig",
    "GRPOConfig",
}
_FUNCTIONAL_LOSSES = {
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
_DATASETS = {
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
}
_TENSOR_SAME = {
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


def _const(v: Val | None) -> object:
    return v.const if v is not None and v.known else None


def _args_named(ev: Event, names: list[str]) -> dict[str, Val]:
    out = dict(ev.kwargs)
    for i, name in enumerate(names):
        if i < len(ev.args) and name not in out:
            out[name] = ev.args[i]
    return out


def _fold(canon: str, ev: Event) -> Val:
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


def symbol_call(w: Walker, ev: Event, canon: str, frame: Frame, ctx: Ctx) -> Val:
    n = apis.last(canon)
    args = ev.args
    node = ev.node
    assert isinstance(node, ast.Call)
    a0 = args[0] if args else None

    # -- builtins and plumbing
    if canon == "range" or canon == "trange":
        if len(args) == 1:
            count = args[0]
        elif len(args) >= 2 and args[0].known and args[1].known:
            try:
                count = Val(const=int(args[1].const) - int(args[0].const))
            except (TypeError, ValueError):
                count = UNKNOWN
        else:
            count = UNKNOWN
        return Val(kind=V.RANGE, items=(count,), taint=merge(*args).taint)
    if canon == "enumerate":
        return Val(kind="enumerate", items=(a0 or UNKNOWN,), taint=(a0 or UNKNOWN).taint)
    if canon == "zip":
        return Val(kind="zip", items=tuple(args))
    if canon == "len":
        if a0 is None:
            return UNKNOWN
        if a0.kind == V.LOADER:
            return Val(taint=a0.taint | {V.LEN_LOADER})
        if a0.kind == V.DATASET:
            return Val(taint=a0.taint | {V.LEN_DATASET})
        if a0.items is not None:
            return Val(const=len(a0.items))
        return a0.plain()
    if canon in ("next",) and a0 is not None:
        return w.element_of(a0, None)
    if n in apis.PASSTHROUGH and a0 is not None:
        return a0
    if n == "sqrt" and a0 is not None and V.WORLD in a0.taint:
        return Val(taint=a0.taint | {"sqrt_world", f"scaled@{ev.where}"})
    if canon in (
        "int",
        "float",
        "str",
        "bool",
        "abs",
        "round",
        "min",
        "max",
        "math.sqrt",
        "math.ceil",
        "math.floor",
        "sqrt",
    ):
        return _fold(canon, ev)
    if canon == "getattr" and len(args) >= 2 and args[1].known:
        got = w.attribute(args[0], str(args[1].const), frame)
        if got is UNKNOWN and len(args) >= 3:
            return args[2]
        return got
    if canon in (
        "dict",
        "SimpleNamespace",
        "types.SimpleNamespace",
        "argparse.Namespace",
        "EasyDict",
        "easydict.EasyDict",
        "edict",
        "OmegaConf.create",
        "omegaconf.OmegaConf.create",
        "Box",
    ):
        pairs = list(a0.mapping or ()) if a0 is not None else []
        pairs += list(ev.kwargs.items())
        return Val(mapping=tuple(pairs))
    if canon in ("os.environ.get", "os.getenv"):
        key = _const(a0)
        default = args[1] if len(args) > 1 else ev.kwargs.get("default")
        return w._env(str(key), default) if key is not None else UNKNOWN

    # -- distributed plumbing
    if n in (
        "get_rank",
        "get_local_rank",
        "get_global_rank",
        "get_node_local_rank",
        "get_ordinal",
        "get_local_ordinal",
    ):
        return Val(taint=frozenset({V.RANK}))
    if n in ("get_world_size", "device_count", "get_local_size", "xrt_world_size"):
        return Val(taint=frozenset({V.WORLD}))
    if n in (
        "is_main_process",
        "is_master",
        "is_rank_zero",
        "is_master_ordinal",
        "is_local_main_process",
    ):
        return Val(taint=frozenset({V.RANK}))
    if n in ("all_reduce", "reduce", "all_reduce_coalesced") and a0 is not None:
        op = ev.kw("op", 1)
        op_name = apis.last(op.canon or "") if op is not None else "SUM"
        label = (
            V.REDUCED_AVG
            if op_name in ("AVG", "MEAN")
            else V.REDUCED_SUM
            if op_name == "SUM"
            else "reduced_other"
        )
        taint = set(a0.taint) | {V.REDUCED, label}
        if V.TOKENS in a0.taint:
            taint.add(V.GLOBAL_TOKENS)
        if node.args and not isinstance(node.args[0], ast.Starred):
            w.rebind(node.args[0], replace(a0, taint=frozenset(taint)), frame)
        return UNKNOWN
    if (
        n in ("all_gather", "all_gather_into_tensor", "all_gather_object", "gather")
        and len(args) >= 2
    ):
        taint = set(args[1].taint) | {V.REDUCED, "gathered"}
        if V.TOKENS in args[1].taint:
            taint.add(V.GLOBAL_TOKENS)
        if node.args and not isinstance(node.args[0], ast.Starred):
            w.rebind(node.args[0], Val(taint=frozenset(taint)), frame)
        return UNKNOWN

    # -- model wrappers
    if apis.is_ddp(canon) and "Sampler" not in canon:
        inner = ev.kw("module", 0) or UNKNOWN
        return _wrap(w, ev, frame, canon, inner, V.DDP)
    if apis.is_fsdp(canon):
        inner = ev.kw("module", 0) or UNKNOWN
        out = _wrap(w, ev, frame, canon, inner, V.FSDP)
        if n == "fully_shard" and node.args:
            w.rebind(node.args[0], out, frame)
        return out
    if n == "initialize" and "deepspeed" in canon:
        model = ev.kwargs.get("model", a0 or UNKNOWN)
        engine = _wrap(w, ev, frame, canon, model, V.DDP)
        eng_obj = w.obj(engine)
        if eng_obj is not None:
            eng_obj.extra["deepspeed"] = True
        opt_in = ev.kwargs.get("optimizer")
        if opt_in is not None and opt_in.kind == V.OPTIMIZER:
            opt = opt_in
        else:
            opt_obj = w.new_obj(V.OPTIMIZER, node, frame, canon="deepspeed.optimizer", kwargs={})
            opt_obj.extra["family"] = None
            opt = Val(kind=V.OPTIMIZER, ref=opt_obj.ref)
        sched = ev.kwargs.get("lr_scheduler", UNKNOWN)
        return Val(items=(engine, opt, Val(kind=V.LOADER), sched))
    if n == "compile" and (canon.startswith("torch") or canon == "compile"):
        target = ev.kw("model", 0) or UNKNOWN
        obj = w.obj(target)
        if obj is not None:
            obj.extra.setdefault("compiled", ev.seq)
        return (
            target if target.kind is not None else Val(kind=V.MODEL, taint=frozenset({"compiled"}))
        )
    if n == "ZeroRedundancyOptimizer":
        kw = _args_named(ev, ["params", "optimizer_class"])
        cls = kw.get("optimizer_class")
        obj = w.new_obj(V.OPTIMIZER, node, frame, canon=canon, kwargs=kw, args=list(args))
        obj.extra["family"] = apis.optimizer_family(cls.canon or "") if cls is not None else None
        obj.extra["zero"] = True
        return Val(kind=V.OPTIMIZER, ref=obj.ref)
    if n in ("get_peft_model", "inject_adapter_in_model") or canon.endswith(
        "PeftModel.from_pretrained"
    ):
        target = ev.kw("model", 0) or UNKNOWN
        obj = w.obj(target)
        if obj is None:
            obj = w.new_obj(V.MODEL, node, frame, canon=canon)
            target = Val(kind=V.MODEL, ref=obj.ref)
        obj.extra["peft"] = ev.seq
        return target
    if n == "convert_sync_batchnorm":
        target = ev.kw("module", 0) or UNKNOWN
        obj = w.obj(target)
        if obj is not None:
            obj.extra["syncbn"] = ev.seq
        return target

    # -- optimisation
    family = apis.optimizer_family(canon)
    if family is not None and n[:1].isupper():
        kw = _args_named(ev, ["params", "lr"])
        obj = w.new_obj(V.OPTIMIZER, node, frame, canon=canon, kwargs=kw, args=list(args))
        obj.extra["family"] = family
        return Val(kind=V.OPTIMIZER, ref=obj.ref)
    if apis.is_scheduler(canon):
        obj = w.new_obj(
            V.SCHEDULER, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args)
        )
        return Val(kind=V.SCHEDULER, ref=obj.ref)
    if n in ("GradScaler", "ShardedGradScaler"):
        obj = w.new_obj(
            V.SCALER, node, frame, canon=canon, kwargs=_args_named(ev, ["device"]), args=list(args)
        )
        return Val(kind=V.SCALER, ref=obj.ref)

    # -- data
    if n in (
        "DistributedSampler",
        "ElasticDistributedSampler",
        "DistributedSamplerWrapper",
        "DistributedBucketSampler",
    ):
        kw = _args_named(ev, ["dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last"])
        obj = w.new_obj(V.DSAMPLER, node, frame, canon=canon, kwargs=kw, args=list(args))
        return Val(kind=V.DSAMPLER, ref=obj.ref)
    if n == "BatchSampler" and a0 is not None and a0.kind == V.DSAMPLER:
        return a0
    if n.endswith("Sampler") and n[:1].isupper():
        obj = w.new_obj(
            V.SAMPLER, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args)
        )
        return Val(kind=V.SAMPLER, ref=obj.ref)
    if n in ("DataLoader", "StatefulDataLoader"):
        kw = _args_named(
            ev,
            [
                "dataset",
                "batch_size",
                "shuffle",
                "sampler",
                "batch_sampler",
                "num_workers",
                "collate_fn",
            ],
        )
        obj = w.new_obj(V.LOADER, node, frame, canon=canon, kwargs=kw, args=list(args))
        return Val(kind=V.LOADER, ref=obj.ref, taint=frozenset({V.DATA}))
    if n == "split_dataset_by_node":
        obj = w.new_obj(
            V.DATASET, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args)
        )
        obj.extra["sharded"] = True
        return Val(kind=V.DATASET, ref=obj.ref)
    if (
        n in _DATASETS
        or canon.startswith("torchvision.datasets")
        or (canon.startswith("datasets.") and n[:1].isupper())
    ):
        obj = w.new_obj(
            V.DATASET, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args)
        )
        return Val(kind=V.DATASET, ref=obj.ref)

    # -- frameworks
    if n == "Accelerator":
        obj = w.new_obj(
            V.ACCELERATOR, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args)
        )
        return Val(kind=V.ACCELERATOR, ref=obj.ref)
    if n in _TRAINING_ARGS:
        obj = w.new_obj(
            V.TRAINING_ARGS, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args)
        )
        return Val(kind=V.TRAINING_ARGS, ref=obj.ref)
    if n.endswith("Trainer") and canon.split(".")[0] in ("transformers", "trl"):
        kw = _args_named(ev, ["model", "args"])
        obj = w.new_obj(V.TRAINER, node, frame, canon=canon, kwargs=kw, args=list(args))
        return Val(kind=V.TRAINER, ref=obj.ref)
    if n in ("ArgumentParser", "HfArgumentParser"):
        obj = w.new_obj(
            V.ARGPARSER, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args)
        )
        obj.extra["defaults"] = {}
        if n == "HfArgumentParser" and a0 is not None:
            obj.extra["dataclasses"] = list(a0.items) if a0.items is not None else [a0]
        return Val(kind=V.ARGPARSER, ref=obj.ref)

    # -- context managers
    if n == "autocast":
        return _autocast(canon, ev)
    if n in ("nullcontext", "suppress", "ExitStack"):
        return Val(kind=V.CTX_NULL)
    if n in ("no_grad", "inference_mode"):
        return Val(kind=V.CTX_NO_GRAD)

    # -- models
    if n == "from_pretrained":
        parts = canon.split(".")
        hf_cls = parts[-2] if len(parts) >= 2 else ""
        if any(s in hf_cls for s in ("Tokenizer", "Processor", "Config", "FeatureExtractor")):
            return Val(kind="tokenizer" if "Tokenizer" in hf_cls else None)
        obj = w.new_obj(V.MODEL, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args))
        obj.extra["hf_class"] = hf_cls
        dtype = ev.kwargs.get("torch_dtype") or ev.kwargs.get("dtype")
        if dtype is not None:
            obj.extra["load_dtype"] = (
                apis.dtype_of(dtype.canon or (str(dtype.const) if dtype.known else None)),
                ev,
            )
        return Val(kind=V.MODEL, ref=obj.ref)
    if (
        canon.startswith(("torchvision.models", "models."))
        and n[:1].islower()
        and n not in ("get_model_weights",)
    ):
        obj = w.new_obj(V.MODEL, node, frame, canon=canon)
        obj.extra["arch"] = n
        return Val(kind=V.MODEL, ref=obj.ref)
    if n in ("create_model", "get_model") and canon.split(".")[0] in (
        "timm",
        "torchvision",
        "models",
    ):
        obj = w.new_obj(V.MODEL, node, frame, canon=canon)
        arch = _const(a0)
        obj.extra["arch"] = str(arch) if arch is not None else None
        return Val(kind=V.MODEL, ref=obj.ref)
    if n in _FUNCTIONAL_LOSSES or (n.endswith("_loss") and canon.split(".")[0] in _TORCHISH):
        base = merge(*args, *ev.kwargs.values())
        red = ev.kwargs.get("reduction")
        red_name = (
            str(red.const)
            if red is not None and red.known
            else ("mean" if red is None else "unknown")
        )
        taint = set(base.taint)
        if red_name == "sum":
            taint.add(V.SUM_RED)
        elif red_name == "mean":
            taint.add(V.MEAN_RED)
        if ev.kwargs.get("ignore_index") is not None:
            taint.add("ignore_index")
        return Val(taint=frozenset(taint), ops=base.ops)
    if _is_nn_class(canon, n):
        if n.endswith("Loss"):
            kw = _args_named(ev, [])
            obj = w.new_obj(V.CRITERION, node, frame, canon=canon, kwargs=kw, args=list(args))
            return Val(kind=V.CRITERION, ref=obj.ref)
        if n == "Parameter":
            return Val(kind="new_param")
        obj = w.new_obj(V.MODEL, node, frame, canon=canon, kwargs=dict(ev.kwargs), args=list(args))
        obj.extra["nn"] = n
        return Val(kind=V.MODEL, ref=obj.ref)

    # -- launchers that call a function of the script
    if n in ("spawn", "start_processes") and a0 is not None and a0.kind == V.FUNCTION:
        extra = ev.kwargs.get("args")
        rest = list(extra.items) if extra is not None and extra.items is not None else []

        if isinstance(a0.const, FuncRef):
            return w.inline(
                a0.const, [Val(taint=frozenset({V.RANK})), *rest], {}, None, None, frame, ctx
            )
    if (
        n in ("Fire", "run", "cli", "CLI", "main")
        and a0 is not None
        and a0.kind == V.FUNCTION
        and isinstance(a0.const, FuncRef)
    ):
        return w.inline(a0.const, [], {}, None, None, frame, ctx)
    if n == "load" and canon.startswith("torch"):
        return Val(kind="state", taint=frozenset({"loaded"}))
    return merge(*args, *ev.kwargs.values())


def _is_nn_class(canon: str, n: str) -> bool:
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


def _wrap(w: Walker, ev: Event, frame: Frame, canon: str, inner: Val, kind: str) -> Val:
    node = ev.node
    inner_obj = w.obj(inner)
    if inner_obj is None:
        inner_obj = w.new_obj(V.MODEL, node, frame, canon="unknown-model")
    kw = _args_named(ev, ["module", "device_ids", "output_device", "dim", "broadcast_buffers"])
    obj = w.new_obj(
        kind, node, frame, canon=canon, kwargs=kw, args=list(ev.args), wraps=inner_obj.ref
    )
    if inner_obj.wrapped_by is None:
        inner_obj.wrapped_by = obj.ref
    return Val(kind=kind, ref=obj.ref)


def _autocast(canon: str, ev: Event) -> Val:
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
        if dtype is None:
            dtype = "unknown"
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


def method_call(w: Walker, ev: Event, recv: Val, method: str, frame: Frame, ctx: Ctx) -> Val:
    kind = recv.kind
    args = ev.args
    node = ev.node
    assert isinstance(node, ast.Call)
    a0 = args[0] if args else None
    obj = w.obj(recv)

    if kind in (V.DDP, V.FSDP, V.MODEL, V.DDP_MODULE):
        if method == "forward":
            return w.forward(recv, ev)
        if method == "no_sync":
            return Val(kind=V.CTX_NO_SYNC, ref=recv.ref)
        if method == "join":
            return Val(kind=V.CTX_NULL)
        if method in ("half", "bfloat16", "to", "type", "float"):
            dtype = None
            if method in ("half", "bfloat16", "float"):
                dtype = {"half": "fp16", "bfloat16": "bf16", "float": "fp32"}[method]
            else:
                for a in [*args, *ev.kwargs.values()]:
                    dtype = dtype or apis.dtype_of(a.canon)
            if dtype is not None and obj is not None:
                obj.extra.setdefault("casts", []).append((dtype, ev))
            return recv
        if method in ("cuda", "cpu", "train", "eval", "double", "requires_grad_", "share_memory"):
            return recv
        if method == "compile":
            if obj is not None:
                obj.extra.setdefault("compiled", ev.seq)
            return UNKNOWN
        if method in ("parameters", "modules", "buffers", "children"):
            return Val(kind=V.PARAMS, ref=recv.ref)
        if method in ("named_parameters", "named_modules", "named_buffers", "named_children"):
            return Val(kind="named_params", ref=recv.ref)
        if method == "state_dict":
            return Val(kind="state")
        if method in apis.MODEL_NON_FORWARD:
            return merge(*args, *ev.kwargs.values())
        return w.forward(recv, ev)

    if kind == V.SCALER:
        if method == "scale" and a0 is not None:
            return a0.with_taint("scaled")
        return UNKNOWN
    if kind == V.ACCELERATOR:
        return _accelerator_method(w, ev, recv, method, frame)
    if kind == V.ARGPARSER:
        return _parser_method(w, ev, recv, method, frame)
    if kind == V.DATASET and method == "shard":
        index = ev.kwargs.get("index")
        new = w.new_obj(V.DATASET, node, frame, canon="shard", kwargs=dict(ev.kwargs))
        new.extra["sharded"] = index is not None and V.RANK in index.taint
        return Val(kind=V.DATASET, ref=new.ref)
    if kind == V.DATASET and method in (
        "map",
        "filter",
        "shuffle",
        "select",
        "with_format",
        "with_transform",
        "set_format",
        "to_iterable_dataset",
        "train_test_split",
        "remove_columns",
        "rename_column",
    ):
        return recv
    if kind in (V.OPTIMIZER, V.SCHEDULER, V.TRAINER, V.LOADER, V.DSAMPLER, V.SAMPLER):
        if method == "state_dict":
            return Val(kind="state")
        return UNKNOWN
    if kind in ("param_groups",):
        return UNKNOWN

    # Tensors and numbers flowing out of the model or the data.
    base = recv.plain()
    if method in _TENSOR_SAME:
        return replace(base, taint=base.taint | ({V.ITEM} if method == "item" else set()))
    if method in ("sum", "nansum"):
        taint = set(base.taint)
        if V.FWD in taint:
            taint.discard(V.MEAN_RED)
            taint.add(V.SUM_RED)
        elif V.DATA in taint:
            taint.add(V.TOKENS)
        return Val(taint=frozenset(taint), ops=base.ops)
    if method in ("numel", "count_nonzero") and V.DATA in base.taint:
        return Val(taint=base.taint | {V.TOKENS})
    if method in ("mean", "nanmean"):
        taint = set(base.taint)
        if V.FWD in taint:
            taint.discard(V.SUM_RED)
            taint.add(V.MEAN_RED)
        return Val(taint=frozenset(taint), ops=base.ops)
    if method in ("div", "div_", "true_divide", "mul", "mul_") and a0 is not None:
        op: ast.operator = ast.Div() if method.startswith(("div", "true")) else ast.Mult()
        arg_node = node.args[0] if node.args else None
        out = w.binop(op, recv, a0, arg_node if isinstance(arg_node, ast.expr) else None)
        if method.endswith("_") and isinstance(node.func, ast.Attribute):
            w.rebind(node.func.value, out, frame)
        return out
    if method in ("chunk", "tensor_split") and a0 is not None and a0.known:
        # x.chunk(K): K micro-batches
        return Val(kind="sized", items=(base, a0), taint=base.taint)
    if (
        method in ("get", "pop", "setdefault")
        and recv.mapping is not None
        and a0 is not None
        and a0.known
    ):
        got = recv.get(str(a0.const))
        if got is not None:
            return got
        return args[1] if len(args) > 1 else UNKNOWN
    if method in ("get", "getenv") and recv.canon == "os.environ" and a0 is not None and a0.known:
        return w._env(str(a0.const), args[1] if len(args) > 1 else None)
    return merge(recv.plain(), *args, *ev.kwargs.values())


def _accelerator_method(w: Walker, ev: Event, recv: Val, method: str, frame: Frame) -> Val:
    node = ev.node
    a0 = ev.args[0] if ev.args else None
    acc = w.obj(recv)
    if method in (
        "prepare",
        "prepare_model",
        "prepare_optimizer",
        "prepare_data_loader",
        "prepare_scheduler",
    ):
        out = [_prepared(w, ev, a, frame, acc) for a in ev.args]
        if len(out) == 1:
            return out[0]
        return Val(items=tuple(out))
    if method == "accumulate":
        return Val(kind=V.CTX_ACCUMULATE, ref=a0.ref if a0 else None)
    if method == "no_sync":
        return Val(kind=V.CTX_NO_SYNC, ref=a0.ref if a0 else None)
    if method == "autocast":
        mp = acc.kwargs.get("mixed_precision") if acc is not None else None
        dtype = (
            {"fp16": "fp16", "bf16": "bf16", "no": "fp32"}.get(str(mp.const))
            if mp is not None and mp.known
            else "unknown"
        )
        return Val(kind=V.CTX_AUTOCAST, const=(dtype, "on"))
    if method in ("gather", "gather_for_metrics", "reduce") and a0 is not None:
        red = ev.kwargs.get("reduction") or (ev.args[1] if len(ev.args) > 1 else None)
        label = "gathered"
        if method == "reduce":
            label = V.REDUCED_AVG if red is not None and red.const == "mean" else V.REDUCED_SUM
        taint = set(a0.taint) | {V.REDUCED, label}
        if V.TOKENS in a0.taint:
            taint.add(V.GLOBAL_TOKENS)
        return Val(taint=frozenset(taint), ops=a0.ops)
    if method == "unwrap_model" and a0 is not None:
        inner = w.obj(a0)
        ref = inner.wraps if inner is not None and inner.wraps is not None else a0.ref
        return Val(kind=V.DDP_MODULE, ref=ref)
    del node
    return UNKNOWN


def _prepared(w: Walker, ev: Event, val: Val, frame: Frame, acc: object) -> Val:
    if val.kind in (V.MODEL, V.DDP_MODULE):
        out = _wrap(w, ev, frame, "accelerate.Accelerator.prepare", val, V.DDP)
        obj = w.obj(out)
        if obj is not None:
            obj.extra["accelerate"] = True
        return out
    obj = w.obj(val)
    if obj is not None:
        obj.extra["accelerate"] = True
    return val


def _parser_method(w: Walker, ev: Event, recv: Val, method: str, frame: Frame) -> Val:
    parser = w.obj(recv)
    node = ev.node
    if parser is None:
        return UNKNOWN
    if method in ("add_argument_group", "add_mutually_exclusive_group"):
        return recv
    if method == "add_argument":
        names = [str(a.const) for a in ev.args if a.known and isinstance(a.const, str)]
        dest_val = ev.kwargs.get("dest")
        if dest_val is not None and dest_val.known:
            dest = str(dest_val.const)
        else:
            longs = [x for x in names if x.startswith("--")]
            shorts = [x for x in names if x.startswith("-")]
            pick = longs[0] if longs else shorts[0] if shorts else names[0] if names else ""
            dest = pick.lstrip("-").replace("-", "_")
        action = ev.kwargs.get("action")
        default = ev.kwargs.get("default")
        if default is None:
            if action is not None and action.const == "store_true":
                default = Val(const=False)
            elif action is not None and action.const == "store_false":
                default = Val(const=True)
            else:
                default = Val(const=None)
        typ = ev.kwargs.get("type")
        if default.known and isinstance(default.const, str) and typ is not None:
            conv = {"int": int, "float": float}.get(apis.last(typ.canon or ""))
            if conv is not None:
                with contextlib.suppress(ValueError):
                    default = Val(const=conv(default.const))
        if dest:
            parser.extra["defaults"][dest] = default
        return UNKNOWN
    if method == "set_defaults":
        parser.extra["defaults"].update(ev.kwargs)
        return UNKNOWN
    if method in ("parse_args", "parse_known_args"):
        ns = w.new_obj(V.ARGS, node, frame, canon="argparse.Namespace")
        ns.extra["parser"] = parser.ref
        out = Val(kind=V.ARGS, ref=ns.ref)
        if method == "parse_known_args":
            return Val(items=(out, UNKNOWN))
        return out
    if method in (
        "parse_args_into_dataclasses",
        "parse_yaml_file",
        "parse_json_file",
        "parse_dict",
    ):
        items = []
        for dc in parser.extra.get("dataclasses", []):
            items.append(_from_cli(w, dc, ev, frame))
        return Val(items=tuple(items)) if len(items) != 1 else items[0]
    return UNKNOWN


def _from_cli(w: Walker, dc: Val, ev: Event, frame: Frame) -> Val:
    """A dataclass instance filled from the command line: only its defaults are known."""

    if dc.kind == "class" and isinstance(dc.const, ClassInfo):
        obj = w.new_obj(V.INSTANCE, ev.node, frame, canon=f"local:{dc.const.name}")
        obj.extra["class"] = dc.const
        for cls in reversed(dc.const.mro()):
            for name in cls.fields:
                val = cls.attrs.get(name)
                if val is not None:
                    obj.attrs[name] = replace(val, taint=val.taint | {V.ARGDEFAULT})
        return Val(kind=V.INSTANCE, ref=obj.ref)
    name = apis.last(dc.canon or "")
    if name in _TRAINING_ARGS:
        obj = w.new_obj(V.TRAINING_ARGS, ev.node, frame, canon=dc.canon or name)
        obj.extra["from_cli"] = True
        return Val(kind=V.TRAINING_ARGS, ref=obj.ref)
    return UNKNOWN
