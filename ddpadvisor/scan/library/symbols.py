"""What calls of imported names return (``torch.optim.AdamW(...)``, ``DataLoader(...)``): the
entries of the symbol table, grouped as the script uses them. Order matters only where two
entries match the same call (the earlier one decides)."""

from __future__ import annotations

import ast
from dataclasses import replace

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.interp.frames import ClassInfo, FuncRef, ModuleScope
from ddpadvisor.scan.library.common import (
    DATASETS,
    FUNCTIONAL_LOSSES,
    TORCHISH,
    TRAINING_ARGS,
    args_named,
    autocast,
    const,
    fold,
    is_nn_class,
    wrap,
)
from ddpadvisor.scan.library.table import Call, symbol
from ddpadvisor.scan.values import UNKNOWN, Val, merge


def _new(c: Call, kind: str, kwargs: dict[str, Val] | None = None, **extra: object) -> Val:
    """A new object of this kind made by the call, with the call's arguments."""
    kw = dict(c.ev.kwargs) if kwargs is None else kwargs
    obj = c.w.new_obj(kind, c.node, c.frame, canon=c.canon, kwargs=kw, args=list(c.args))
    obj.extra.update(extra)
    return Val(kind=kind, ref=obj.ref)


# -- builtins and plumbing ------------------------------------------------------------------


@symbol("range", "trange")
def range_(c: Call) -> Val:
    args = c.args
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


@symbol("enumerate")
def enumerate_(c: Call) -> Val:
    a0 = c.a0 or UNKNOWN
    return Val(kind="enumerate", items=(a0,), taint=a0.taint)


@symbol("zip")
def zip_(c: Call) -> Val:
    return Val(kind="zip", items=tuple(c.args))


@symbol("len")
def len_(c: Call) -> Val:
    a0 = c.a0
    if a0 is None:
        return UNKNOWN
    if a0.kind == V.LOADER:
        return Val(taint=a0.taint | {V.LEN_LOADER})
    if a0.kind == V.DATASET:
        return Val(taint=a0.taint | {V.LEN_DATASET})
    if a0.items is not None:
        return Val(const=len(a0.items))
    if V.FWD in a0.taint:
        # how many losses a list holds, or how many samples an output has: a count of this
        # rank's own values, not a loss, nor reduced the way its elements were
        kept = {t for t in a0.taint if not _loss_label(t)}
        return Val(taint=frozenset(kept | {V.SIZE}))
    return a0.plain()


@symbol("int")
def int_(c: Call) -> Val | None:
    """``int(x)`` of a forward pass's number: a count (episodes, correct predictions,
    tokens), shown as a whole number; a loss is never shown that way. Like ``len``, it keeps
    none of the loss's labels, so a count summed over the ranks is not a summed loss."""
    a0 = c.a0
    if a0 is None or c.node.keywords or len(c.args) != 1 or V.FWD not in a0.taint:
        return None
    kept = {t for t in a0.taint if not _loss_label(t)}
    return Val(taint=frozenset(kept | {V.SIZE}))


def _loss_label(t: str) -> bool:
    """A label a forward pass's value carries as a value (not as a count)."""
    return (
        t in (V.FWD, V.SUM_RED, V.MEAN_RED, V.LOSS_NAMED)
        or t.startswith(("fwdseq:", "fwdof:", "model:", "route:", "divworld@", "scaled"))
        or V.is_reduction_label(t)
    )


@symbol("next")
def next_(c: Call) -> Val | None:
    """``next(it)``: an item of what ``it`` iterates; on an object of a project class with a
    ``__next__`` (an endless loader wrapper, a prefetcher), what that method returns."""
    a0 = c.a0
    if a0 is None:
        return None
    obj = c.w.obj(a0) if a0.ref is not None else None
    info = obj.extra.get("class") if obj is not None else None
    if isinstance(info, ClassInfo) and a0.kind not in (V.LOADER, V.DATASET):
        found = info.find_method("__next__")
        if found is not None:
            ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
            return c.w.inline(ref, [], {}, a0, None, c.frame, c.ctx)
    return c.w.element_of(a0, None)


@symbol(names=apis.PASSTHROUGH)
def passthrough(c: Call) -> Val | None:
    return c.a0


@symbol(names=("sqrt",))
def sqrt_of_world(c: Call) -> Val | None:
    a0 = c.a0
    if a0 is not None and V.WORLD in a0.taint:
        return Val(taint=a0.taint | {"sqrt_world", f"scaled@{c.ev.where}"})
    return None


@symbol(
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
)
def pure_builtin(c: Call) -> Val:
    return fold(c.canon, c.ev)


@symbol("getattr")
def getattr_(c: Call) -> Val | None:
    """``getattr(obj, "name")``; a name that is only a command-line default
    (``getattr(torchvision.models, args.arch)``) picks nothing: the run may name another."""
    args = c.args
    if len(args) < 2 or not args[1].known or args[1].taint & {V.ARGDEFAULT, V.UNBOUND}:
        if len(args) >= 2 and args[0].kind == "module" and isinstance(args[0].const, ModuleScope):
            # ``TrainerClass = getattr(trainers, config.loss.trainer)``: a class or function
            # of the project picked by a name the run sets; which one is not read
            node = c.node
            picked = ast.unparse(node.args[1]) if len(node.args) >= 2 else "a name"
            c.w.warnings.append(
                f"{c.ev.where}: {args[0].const.module.label} member picked by {picked[:60]} "
                "(the run's name); the code it names is not followed"
            )
        return None
    got = c.w.attribute(args[0], str(args[1].const), c.frame)
    if got is UNKNOWN and len(args) >= 3:
        return args[2]
    return got


@symbol("setattr")
def setattr_(c: Call) -> Val:
    """``setattr(obj, "name", value)`` binds one attribute. With a name the scan cannot read
    (``for k, v in kwargs.items(): setattr(config, k, v)``, a config updated from the command
    line or a file), any attribute of the object may now hold another value: what it held
    (a dataclass field's default) stays only as a default the run may override, so a test on
    it is not a constant switch (``if cfg.enable_fsdp:`` is not dead code)."""
    args = c.args
    obj = c.w.obj(args[0]) if args else None
    if obj is None or len(args) < 3:
        return UNKNOWN
    name = args[1]
    if name.known and isinstance(name.const, str) and not name.taint & {V.ARGDEFAULT}:
        obj.attrs[name.const] = args[2]
        return UNKNOWN
    info = obj.extra.get("class")
    names = list(obj.attrs)
    if isinstance(info, ClassInfo):
        names += [n for cls in reversed(info.mro()) for n in [*cls.fields, *cls.attrs]]
    for attr in dict.fromkeys(names):
        held = obj.attrs.get(attr)
        if held is None and isinstance(info, ClassInfo):
            held = info.find_attr(attr)
        if held is None or held.kind in (V.FUNCTION, "class", "method"):
            continue
        obj.attrs[attr] = replace(held, taint=held.taint | {V.ARGDEFAULT})
    obj.extra["attrs_overridden"] = c.ev.where
    return UNKNOWN


@symbol(
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
)
def mapping(c: Call) -> Val:
    pairs = list(c.a0.mapping or ()) if c.a0 is not None else []
    pairs += list(c.ev.kwargs.items())
    return Val(mapping=tuple(pairs))


@symbol("os.environ.get", "os.getenv")
def getenv(c: Call) -> Val:
    key = const(c.a0)
    default = c.args[1] if len(c.args) > 1 else c.ev.kwargs.get("default")
    return c.w._env(str(key), default) if key is not None else UNKNOWN


# -- distributed plumbing -------------------------------------------------------------------


@symbol(
    names=(
        "get_rank",
        "get_local_rank",
        "get_global_rank",
        "get_node_local_rank",
        "get_ordinal",
        "get_local_ordinal",
        "is_main_process",
        "is_master",
        "is_rank_zero",
        "is_master_ordinal",
        "is_local_main_process",
    )
)
def rank(c: Call) -> Val:
    return Val(taint=frozenset({V.RANK}))


@symbol(names=("get_world_size", "device_count", "get_local_size", "xrt_world_size"))
def world_size(c: Call) -> Val:
    return Val(taint=frozenset({V.WORLD}))


@symbol(names=("all_reduce", "reduce", "all_reduce_coalesced"))
def all_reduce(c: Call) -> Val | None:
    a0 = c.a0
    if a0 is None:
        return None
    op = c.ev.kw("op", 1)
    op_name = apis.last(op.canon or "") if op is not None else "SUM"
    label = (
        V.REDUCED_AVG
        if op_name in ("AVG", "MEAN")
        else V.REDUCED_SUM
        if op_name == "SUM"
        else "reduced_other"
    )
    taint = set(V.reduced(a0, label))
    if V.TOKENS in a0.taint:
        taint.add(V.GLOBAL_TOKENS)
    node = c.node
    if node.args and not isinstance(node.args[0], ast.Starred):
        c.w.rebind(node.args[0], replace(a0, taint=frozenset(taint)), c.frame)
    return UNKNOWN


@symbol(names=("all_gather", "all_gather_into_tensor", "all_gather_object", "gather"))
def all_gather(c: Call) -> Val | None:
    args = c.args
    if len(args) < 2:
        return None
    taint = set(V.reduced(args[1], V.GATHERED))
    if V.TOKENS in args[1].taint:
        taint.add(V.GLOBAL_TOKENS)
    node = c.node
    if node.args and not isinstance(node.args[0], ast.Starred):
        c.w.rebind(node.args[0], Val(taint=frozenset(taint)), c.frame)
    return UNKNOWN


# -- model wrappers -------------------------------------------------------------------------


@symbol(
    "torch.nn.parallel.DistributedDataParallel",
    names=("DistributedDataParallel", "DDP"),
    when=lambda canon, _: canon.endswith("parallel.DistributedDataParallel"),
)
def ddp(c: Call) -> Val | None:
    if "Sampler" in c.canon:
        return None
    return wrap(c.w, c.ev, c.frame, c.canon, c.ev.kw("module", 0) or UNKNOWN, V.DDP)


@symbol(
    "torch.distributed.fsdp.FullyShardedDataParallel",
    names=("FullyShardedDataParallel", "FSDP", "fully_shard"),
)
def fsdp(c: Call) -> Val:
    out = wrap(c.w, c.ev, c.frame, c.canon, c.ev.kw("module", 0) or UNKNOWN, V.FSDP)
    if c.name == "fully_shard" and c.node.args:
        c.w.rebind(c.node.args[0], out, c.frame)
    return out


@symbol("deepspeed.initialize", when=lambda canon, n: n == "initialize" and "deepspeed" in canon)
def deepspeed_initialize(c: Call) -> Val:
    w, ev = c.w, c.ev
    model = ev.kwargs.get("model", c.a0 or UNKNOWN)
    engine = wrap(w, ev, c.frame, c.canon, model, V.DDP)
    eng_obj = w.obj(engine)
    if eng_obj is not None:
        eng_obj.extra["deepspeed"] = True
    opt_in = ev.kwargs.get("optimizer")
    if opt_in is not None and opt_in.kind == V.OPTIMIZER:
        opt = opt_in
    else:
        opt_obj = w.new_obj(V.OPTIMIZER, c.node, c.frame, canon="deepspeed.optimizer", kwargs={})
        opt_obj.extra["family"] = None
        opt = Val(kind=V.OPTIMIZER, ref=opt_obj.ref)
    sched = ev.kwargs.get("lr_scheduler", UNKNOWN)
    return Val(items=(engine, opt, Val(kind=V.LOADER), sched))


@symbol(
    "torch.compile",
    "compile",
    when=lambda canon, n: n == "compile" and canon.startswith("torch"),
)
def torch_compile(c: Call) -> Val:
    target = c.ev.kw("model", 0) or UNKNOWN
    obj = c.w.obj(target)
    if obj is not None:
        obj.extra.setdefault("compiled", c.ev.seq)
    if target.kind is not None:
        return target
    return Val(kind=V.MODEL, taint=frozenset({"compiled"}))


@symbol("torch.distributed.optim.ZeroRedundancyOptimizer", names=("ZeroRedundancyOptimizer",))
def zero_optimizer(c: Call) -> Val:
    kw = args_named(c.ev, ["params", "optimizer_class"])
    cls = kw.get("optimizer_class")
    family = apis.optimizer_family(cls.canon or "") if cls is not None else None
    return _new(c, V.OPTIMIZER, kw, family=family, zero=True)


@symbol(
    "peft.get_peft_model",
    names=("get_peft_model", "inject_adapter_in_model"),
    when=lambda canon, _: canon.endswith("PeftModel.from_pretrained"),
)
def peft_adapters(c: Call) -> Val:
    target = c.ev.kw("model", 0) or UNKNOWN
    obj = c.w.obj(target)
    if obj is None:
        obj = c.w.new_obj(V.MODEL, c.node, c.frame, canon=c.canon)
        target = Val(kind=V.MODEL, ref=obj.ref)
    obj.extra["peft"] = c.ev.seq
    return target


@symbol("torch.nn.SyncBatchNorm.convert_sync_batchnorm", names=("convert_sync_batchnorm",))
def sync_batchnorm(c: Call) -> Val:
    target = c.ev.kw("module", 0) or UNKNOWN
    obj = c.w.obj(target)
    if obj is not None:
        obj.extra["syncbn"] = c.ev.seq
    return target


# -- optimisation ---------------------------------------------------------------------------


@symbol(when=lambda canon, n: apis.optimizer_family(canon) is not None and n[:1].isupper())
def optimizer(c: Call) -> Val:
    family = apis.optimizer_family(c.canon)
    return _new(c, V.OPTIMIZER, args_named(c.ev, ["params", "lr"]), family=family)


@symbol(when=lambda canon, _: apis.is_scheduler(canon))
def scheduler(c: Call) -> Val:
    return _new(c, V.SCHEDULER)


@symbol("torch.amp.GradScaler", names=("GradScaler", "ShardedGradScaler"))
def grad_scaler(c: Call) -> Val:
    return _new(c, V.SCALER, args_named(c.ev, ["device"]))


# -- data -----------------------------------------------------------------------------------


@symbol(
    "torch.utils.data.DistributedSampler",
    # torchdata's resumable sampler subclasses DistributedSampler (same arguments, and the
    # same set_epoch reseeding): https://github.com/pytorch/data/blob/main/torchdata/
    # stateful_dataloader/sampler.py. Other libraries' samplers of that name differ.
    "torchdata.stateful_dataloader.sampler.StatefulDistributedSampler",
    "torchdata.stateful_dataloader.StatefulDistributedSampler",
    names=(
        "DistributedSampler",
        "ElasticDistributedSampler",
        "DistributedSamplerWrapper",
        "DistributedBucketSampler",
    ),
)
def distributed_sampler(c: Call) -> Val:
    kw = args_named(c.ev, ["dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last"])
    return _new(c, V.DSAMPLER, kw)


@symbol("torch.utils.data.BatchSampler", names=("BatchSampler",))
def batch_sampler(c: Call) -> Val | None:
    return c.a0 if c.a0 is not None and c.a0.kind == V.DSAMPLER else None


@symbol(when=lambda _, n: n.endswith("Sampler") and n[:1].isupper())
def sampler(c: Call) -> Val:
    return _new(c, V.SAMPLER)


@symbol("torch.utils.data.DataLoader", names=("DataLoader", "StatefulDataLoader"))
def data_loader(c: Call) -> Val:
    kw = args_named(
        c.ev,
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
    loader = _new(c, V.LOADER, kw)
    return replace(loader, taint=frozenset({V.DATA}))


@symbol("torch.Generator")
def generator(c: Call) -> Val:
    return _new(c, V.RNG)


@symbol("datasets.distributed.split_dataset_by_node", names=("split_dataset_by_node",))
def split_by_node(c: Call) -> Val:
    return _new(c, V.DATASET, sharded=True)


@symbol(
    names=DATASETS,
    when=lambda canon, n: (
        canon.startswith("torchvision.datasets")
        or (canon.startswith("datasets.") and n[:1].isupper())
    ),
)
def dataset(c: Call) -> Val:
    return _new(c, V.DATASET)


# -- frameworks -----------------------------------------------------------------------------


@symbol("accelerate.Accelerator", names=("Accelerator",))
def accelerator(c: Call) -> Val:
    return _new(c, V.ACCELERATOR)


@symbol(
    "lightning.Fabric",
    when=lambda canon, n: (
        n == "Fabric"
        and canon.split(".")[0] in ("lightning", "lightning_fabric", "pytorch_lightning")
    ),
)
def fabric(c: Call) -> Val:
    """Lightning Fabric plays accelerate's part (library/lightning.py: FABRIC_METHODS): it
    launches the ranks, wraps the model, shards the loaders and runs backward."""
    return _new(c, V.ACCELERATOR, fabric=True)


@symbol(
    # transformers' and TRL's own: a class of that name from another library (a Megatron
    # adapter's DPOConfig) has other fields and defaults.
    when=lambda canon, n: n in TRAINING_ARGS and canon.split(".")[0] in ("transformers", "trl", n)
)
def training_arguments(c: Call) -> Val:
    return _new(c, V.TRAINING_ARGS)


@symbol(
    when=lambda canon, n: n.endswith("Trainer") and canon.split(".")[0] in ("transformers", "trl")
)
def hf_trainer(c: Call) -> Val:
    return _new(c, V.TRAINER, args_named(c.ev, ["model", "args"]))


@symbol(
    when=lambda canon, n: (
        n == "Trainer" and canon.split(".")[0] in ("lightning", "pytorch_lightning")
    )
)
def lightning_trainer(c: Call) -> Val:
    return _new(c, V.PL_TRAINER)


@symbol("argparse.ArgumentParser", names=("ArgumentParser", "HfArgumentParser"))
def argument_parser(c: Call) -> Val:
    parser = _new(c, V.ARGPARSER, defaults={})
    a0 = c.a0
    if c.name == "HfArgumentParser" and a0 is not None:
        obj = c.w.obj(parser)
        if obj is not None:
            obj.extra["dataclasses"] = list(a0.items) if a0.items is not None else [a0]
    return parser


# -- context managers -----------------------------------------------------------------------


@symbol("torch.autocast", names=("autocast",))
def autocast_(c: Call) -> Val:
    return autocast(c.canon, c.ev)


@symbol("functools.partial", names=("partial",))
def partial_(c: Call) -> Val | None:
    """``partial(torch.autocast, device_type="cuda", dtype=dt)``: a callable that calls its
    first argument with these arguments first (calling it is read as that call)."""
    fn = c.a0
    if fn is None or fn.kind not in ("symbol", V.FUNCTION, "class", "method"):
        return None
    return Val(kind=V.PARTIAL, items=(fn, *c.args[1:]), mapping=tuple(c.ev.kwargs.items()))


@symbol("contextlib.nullcontext", names=("nullcontext", "suppress", "ExitStack"))
def null_context(c: Call) -> Val:
    return Val(kind=V.CTX_NULL)


@symbol("torch.no_grad", names=("no_grad", "inference_mode"))
def no_grad(c: Call) -> Val:
    return Val(kind=V.CTX_NO_GRAD)


# -- models and losses ----------------------------------------------------------------------


@symbol(names=("from_pretrained", "from_config"))
def from_pretrained(c: Call) -> Val:
    """``AutoModelFor….from_pretrained(name)`` or ``.from_config(config)`` (a model built from a
    config, no download): a model of that class either way."""
    parts = c.canon.split(".")
    hf_cls = parts[-2] if len(parts) >= 2 else ""
    if any(s in hf_cls for s in ("Tokenizer", "Processor", "Config", "FeatureExtractor")):
        return Val(kind="tokenizer" if "Tokenizer" in hf_cls else None)
    model = _new(c, V.MODEL, hf_class=hf_cls)
    dtype = c.ev.kwargs.get("torch_dtype") or c.ev.kwargs.get("dtype")
    obj = c.w.obj(model)
    if dtype is not None and obj is not None:
        obj.extra["load_dtype"] = (
            apis.dtype_of(dtype.canon or (str(dtype.const) if dtype.known else None)),
            c.ev,
        )
    return model


@symbol(
    when=lambda canon, n: (
        canon.startswith(("torchvision.models", "models."))
        and n[:1].islower()
        and n != "get_model_weights"
    )
)
def vision_model(c: Call) -> Val:
    obj = c.w.new_obj(V.MODEL, c.node, c.frame, canon=c.canon)
    obj.extra["arch"] = c.name
    return Val(kind=V.MODEL, ref=obj.ref)


@symbol(names=("create_model", "get_model"))
def model_factory(c: Call) -> Val | None:
    """A model chosen by name. A name that is only a command-line default is not the run's
    architecture (``extra["arch_default"]`` keeps it for the note asking for --set)."""
    if c.canon.split(".")[0] not in ("timm", "torchvision", "models"):
        return None
    obj = c.w.new_obj(V.MODEL, c.node, c.frame, canon=c.canon)
    name = c.ev.kwargs.get("model_name") or c.a0
    arch = const(name)
    if name is not None and arch is not None and name.taint & {V.ARGDEFAULT, V.UNBOUND}:
        obj.extra["arch_default"] = str(arch)
        arch = None
    obj.extra["arch"] = str(arch) if arch is not None else None
    return Val(kind=V.MODEL, ref=obj.ref)


@symbol(
    names=FUNCTIONAL_LOSSES,
    when=lambda canon, n: n.endswith("_loss") and canon.split(".")[0] in TORCHISH,
)
def functional_loss(c: Call) -> Val:
    base = merge(*c.args, *c.ev.kwargs.values())
    red = c.ev.kwargs.get("reduction")
    red_name = (
        str(red.const) if red is not None and red.known else ("mean" if red is None else "unknown")
    )
    taint = set(base.taint)
    if red_name == "sum":
        taint.add(V.SUM_RED)
    elif red_name == "mean":
        taint.add(V.MEAN_RED)
    if c.ev.kwargs.get("ignore_index") is not None:
        taint.add("ignore_index")
    return Val(taint=frozenset(taint), ops=base.ops)


@symbol(when=is_nn_class)
def nn_module(c: Call) -> Val:
    if c.name.endswith("Loss"):
        return _new(c, V.CRITERION, args_named(c.ev, []))
    if c.name == "Parameter":
        return Val(kind="new_param")
    return _new(c, V.MODEL, nn=c.name)


# -- launchers that call a function of the script -------------------------------------------


@symbol("torch.multiprocessing.spawn", names=("spawn", "start_processes"))
def spawn(c: Call) -> Val | None:
    """``mp.spawn(fn, args=(...))`` (or ``fn=`` by keyword): each process runs ``fn(rank,
    *args)``; the walk reads it once, for a rank of the job."""
    a0 = c.a0 if c.a0 is not None else c.ev.kwargs.get("fn")
    if a0 is None or a0.kind != V.FUNCTION or not isinstance(a0.const, FuncRef):
        return None
    extra = c.ev.kwargs.get("args")
    rest = list(extra.items) if extra is not None and extra.items is not None else []
    rank = Val(taint=frozenset({V.RANK}))
    return c.w.inline(a0.const, [rank, *rest], {}, None, None, c.frame, c.ctx)


@symbol(
    when=lambda canon, n: (
        canon.startswith("submitit.")
        and n in ("AutoExecutor", "SlurmExecutor", "LocalExecutor", "DebugExecutor")
    )
)
def submitit_executor(c: Call) -> Val:
    """A submitit executor: what it is handed by ``submit`` runs in each task of the job
    (``library/methods.py``)."""
    return Val(kind="submitit_executor")


@symbol("fire.Fire", names=("Fire", "run", "cli", "CLI", "main"))
def cli_entry(c: Call) -> Val | None:
    """``fire.Fire(main)``, jsonargparse's ``CLI(setup)``, ``typer.run(main)``: the function's
    parameters are command-line options, so a literal default is only a default."""
    a0 = c.a0
    if a0 is None or a0.kind != V.FUNCTION or not isinstance(a0.const, FuncRef):
        return None
    return c.w.inline(a0.const, [], _option_defaults(a0.const.node), None, None, c.frame, c.ctx)


def _option_defaults(fn: ast.AST) -> dict[str, Val]:
    """The defaults of a CLI entry's parameters, marked as command-line defaults: a literal
    keeps its value, an object built as a default (a dataclass of options) does not."""
    args = getattr(fn, "args", None)
    if not isinstance(args, ast.arguments):
        return {}
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
    pairs += [(p, d) for p, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    out: dict[str, Val] = {}
    for p, d in pairs:
        if isinstance(d, ast.Constant):
            out[p.arg] = Val(const=d.value, taint=frozenset({V.ARGDEFAULT}))
        elif isinstance(d, ast.Call):
            # ``train: TrainArgs = TrainArgs(max_norm=1.0, ...)``: jsonargparse and fire set
            # each field from the command line, so none of the default's values is known
            out[p.arg] = Val(taint=frozenset({V.ARGDEFAULT, "cli"}))
    return out


@symbol("torch.load", when=lambda canon, n: n == "load" and canon.startswith("torch"))
def torch_load(c: Call) -> Val:
    return Val(kind="state", taint=frozenset({"loaded"}))
