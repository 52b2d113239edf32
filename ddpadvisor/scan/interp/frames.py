"""What the interpreter keeps: module scopes, frames, functions and classes it met, the result."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Event, LoopCtx
from ddpadvisor.scan.source import Module, SourceSet
from ddpadvisor.scan.values import UNKNOWN, Obj, Val

MAX_DEPTH = 24  # nested inlined calls
MAX_INLINES_PER_FUNCTION = 4  # later calls reuse the first results: keeps big files fast
DEFAULT_BUDGET = 60_000  # statements visited in total

_MODEL_KINDS = (V.DDP, V.FSDP, V.MODEL, V.DDP_MODULE)
_CTX_KINDS = (V.CTX_NO_SYNC, V.CTX_NULL, V.CTX_ACCUMULATE, V.CTX_AUTOCAST, V.CTX_NO_GRAD)

_RANK_ENV = {
    "RANK",
    "LOCAL_RANK",
    "GLOBAL_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "NODE_RANK",
    "GROUP_RANK",
}
_WORLD_ENV = {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}
_RANK_NAMES = {"rank", "local_rank", "global_rank", "ddp_rank", "ddp_local_rank", "gpu", "gpu_id"}
_WORLD_NAMES = {
    "world_size",
    "ddp_world_size",
    "num_gpus",
    "n_gpus",
    "ngpus",
    "ngpus_per_node",
    "nprocs",
    "num_processes",
}
# A getter whose name says it returns the data-parallel world size (Megatron's
# get_data_parallel_world_size, a recipe's own _get_dp_group_size): its result is the world size
# even when its body is not read.
_WORLD_GETTER = re.compile(r"_?(?:get_)?(?:(?:data_parallel|dp|ddp)_(?:group_|world_)?|world_)size")
_MAIN_PROCESS_NAMES = {
    "master_process",
    "is_master",
    "is_main",
    "is_main_process",
    "main_process",
    "is_rank0",
    "is_rank_zero",
    "rank0",
    "is_master_process",
    "is_local_main_process",
    "is_world_process_zero",
    "is_local_process_zero",
    "is_global_zero",  # Lightning's trainer.is_global_zero
}


# The kind of a name bound by a module-level import inside an imported module, until used.
LAZY = "lazy_import"


@dataclass(frozen=True)
class LazyImport:
    """``from module import name`` (``name`` None: ``import module``, bound as ``bound``)."""

    module: str
    name: str | None
    bound: str = ""


@dataclass(eq=False, repr=False)
class ModuleScope:
    module: Module
    globals: dict[str, Val] = field(default_factory=dict)
    exprs: dict[str, ast.expr] = field(default_factory=dict)
    walked: bool = False


@dataclass(eq=False, repr=False)
class FuncRef:
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    scope: ModuleScope
    closure: Frame | None
    owner: ClassInfo | None = None

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")


@dataclass(eq=False, repr=False)
class ClassInfo:
    node: ast.ClassDef
    scope: ModuleScope
    bases: list[Val]
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    attrs: dict[str, Val] = field(default_factory=dict)
    fields: list[str] = field(default_factory=list)
    is_dataclass: bool = False

    @property
    def name(self) -> str:
        return self.node.name

    def mro(self) -> list[ClassInfo]:
        out: list[ClassInfo] = [self]
        for base in self.bases:
            if base.kind == "class" and isinstance(base.const, ClassInfo) and len(out) < 16:
                out.extend(c for c in base.const.mro() if c not in out)
        return out

    def external_bases(self) -> list[str]:
        out: list[str] = []
        for cls in self.mro():
            out.extend(b.canon or "" for b in cls.bases if b.kind != "class")
        return out

    def find_method(
        self, name: str
    ) -> tuple[ClassInfo, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        for cls in self.mro():
            if name in cls.methods:
                return cls, cls.methods[name]
        return None

    def find_attr(self, name: str) -> Val | None:
        for cls in self.mro():
            if name in cls.attrs:
                return cls.attrs[name]
        return None

    def object_kind(self) -> str:
        for base in self.external_bases():
            name = apis.last(base)
            if name.endswith("Trainer") and base.split(".")[0] in ("transformers", "trl"):
                return V.TRAINER
            if name == "Accelerator" and base.split(".")[0] == "accelerate":
                # the project's own Accelerator (a thin subclass): prepare(), accumulate(),
                # backward() are accelerate's unless the class overrides them
                return V.ACCELERATOR
            if name in ("Module", "LightningModule", "PreTrainedModel") or name.endswith("Model"):
                return V.MODEL
            if name.endswith("Dataset"):
                return V.DATASET
            if name.endswith("Sampler"):
                return V.SAMPLER
            if name == "Optimizer" and base.split(".")[0] == "torch":
                # the project's own optimizer (LARS over ``torch.optim.Optimizer``): its
                # ``step()`` is the optimizer step and its param_groups carry the rate
                return V.OPTIMIZER
        return V.INSTANCE


@dataclass(eq=False, repr=False)
class Frame:
    scope: ModuleScope
    locals: dict[str, Val]
    exprs: dict[str, ast.expr]
    parent: Frame | None = None
    name: str = "<module>"
    returns: list[Val] = field(default_factory=list)
    yields: list[Val] = field(default_factory=list)
    # Per ``yield``, the innermost context of known kind the generator's body holds open
    # around it (a ``@contextmanager`` helper's ``with torch.amp.autocast(...): yield``), or
    # None: what a ``with helper():`` enters.
    yield_contexts: list[Val | None] = field(default_factory=list)
    # A method's frame: the class that defines it and the instance it runs on (``super()``).
    owner: ClassInfo | None = None
    self_val: Val | None = None
    # Names the function's ``global`` statements declare: bound in the module, not here.
    global_names: frozenset[str] = frozenset()


@dataclass
class WalkResult:
    events: list[Event]
    objects: dict[int, Obj]
    sources: SourceSet
    warnings: list[str]
    truncated: bool
    classes: list[ClassInfo]
    functions: list[FuncRef]
    rank_slices: list[str]
    loops: list[LoopCtx] = field(default_factory=list)  # every loop met, in walk order


def _always_exits(body: list[ast.stmt], test: ast.expr) -> bool:
    """Whether ``if test: body`` makes the code after it a per-step condition on ``test``.

    ``continue`` does (the accumulation idiom ``if (i + 1) % k: continue``), and so does a
    ``return`` on a step counter modulo something (``if step % k: return`` in a per-step
    function). ``break``, ``raise``, ``sys.exit()`` and other returns leave the loop, the
    function or the program: the code after them runs on every step that gets there, so it
    is not made conditional on ``test``.
    """
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Continue):
        return True
    return isinstance(last, ast.Return) and any(
        isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mod) for sub in ast.walk(test)
    )


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


_EXPANDABLE = (
    ast.BinOp,
    ast.BoolOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Tuple,
    ast.List,
    ast.Subscript,
)


def _constant(val: Val, where: ast.expr) -> ast.Constant:
    """A known value as a literal; remembers when it is only a command-line default."""
    node = ast.copy_location(ast.Constant(val.const), where)
    if V.ARGDEFAULT in val.taint:
        node.argdefault = True  # type: ignore[attr-defined]
    return node


def is_cli_default(node: ast.AST | None) -> bool:
    return (
        any(getattr(n, "argdefault", False) for n in ast.walk(node)) if node is not None else False
    )


def _simple_expr(expr: ast.expr, name: str, budget: int = 40) -> bool:
    """Worth remembering for condition expansion: small, and not referring to itself."""
    stack: list[ast.AST] = [expr]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > budget or isinstance(node, (ast.Lambda, ast.comprehension, ast.Await)):
            return False
        if isinstance(node, ast.Name) and node.id == name:
            return False
        stack.extend(ast.iter_child_nodes(node))
    return True


def _target_names(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


_AUG_OPS = {ast.Div: "div", ast.FloorDiv: "div", ast.Mult: "mul", ast.Add: "add", ast.Sub: "sub"}


def _count_of(it: Val) -> Val | None:
    if it.kind == V.RANGE and it.items:
        return it.items[0]
    if it.kind == "zip" and it.items:
        counts = [i.items[0] for i in it.items if i.kind == V.RANGE and i.items]
        return counts[0] if len(counts) == 1 else None
    return None


def union(vals: list[Val]) -> Val:
    """Several possible values (e.g. two return statements): keep objects, merge taint."""
    real = [v for v in vals if v is not UNKNOWN and (v.kind or v.taint or v.items or v.known)]
    if not real:
        return vals[-1] if vals else UNKNOWN
    first = real[0]
    # A constant on one path and an unknown value on another (``if not dist.is_available():
    # return False`` then ``return dist.is_initialized()``) is not that constant.
    some_unknown = len(real) < len(vals) and all(v.known for v in real)
    if some_unknown:
        return Val(taint=frozenset().union(*(v.taint for v in vals)), ops=first.ops)
    if len(real) == 1:
        return first
    lengths = {len(v.items) for v in real if v.items is not None}
    if len(lengths) == 1 and all(v.items is not None for v in real):
        n = lengths.pop()
        return Val(items=tuple(union([v.items[i] for v in real if v.items]) for i in range(n)))
    taint = frozenset().union(*(v.taint for v in real))
    with_kind = [v for v in real if v.kind is not None]
    if with_kind:
        return replace(with_kind[0], taint=taint)
    plain = (int, float, str, bool, type(None))
    if (
        first.known
        and isinstance(first.const, plain)
        and all(v.known and isinstance(v.const, plain) and v.const == first.const for v in real)
    ):
        return replace(first, taint=taint)
    return Val(taint=taint, ops=first.ops)


# Callables that make a context manager, by last name: a helper returning one of them on one
# path and another on the other (``get_autocast(precision)``: ``suppress`` or
# ``partial(torch.autocast, dtype=...)``) picks the context by its argument.
CONTEXT_MAKERS = frozenset(
    {"autocast", "nullcontext", "suppress", "ExitStack", "no_sync", "no_grad", "inference_mode"}
)


def makes_context(v: Val) -> bool:
    if v.kind in _CTX_KINDS or v.kind == V.BOUND:
        return True
    if v.kind == V.PARTIAL and v.items:
        v = v.items[0]
    return v.kind == "symbol" and apis.last(v.canon or "") in CONTEXT_MAKERS


def reading(v: Val) -> tuple[object, ...]:
    """What calling or entering ``v`` does, for telling alternatives apart."""
    if v.kind == V.PARTIAL and v.items:
        bound = tuple((k, x.const if x.known else x.canon) for k, x in v.mapping or ())
        return (V.PARTIAL, v.items[0].canon, bound)
    const = v.const if v.known or isinstance(v.const, tuple) else None
    return (v.kind, v.canon, v.ref, const)
