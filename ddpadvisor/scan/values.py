"""Abstract values: what the scanner knows about an expression without running it.

A :class:`Val` carries an object *kind* (this is a DDP model, an optimizer, a sampler …),
an identity (``ref``) for objects the script created, a constant when one is known, and
*taint*: where the value came from (rank, world size, a forward pass, an all_reduce …).
Taint flows through arithmetic and unknown calls, so ``loss = crit(model(x), y) / accum``
is known to come from a forward pass through the DDP model and to be divided by ``accum``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from typing import Any


class _NoConst:
    def __repr__(self) -> str:
        return "NO_CONST"


NO_CONST: Any = _NoConst()
_PLAIN = (int, float, str, bool, bytes, complex, tuple, type(None))

# Taint labels.
RANK = "rank"
WORLD = "world_size"
FWD = "fwd"  # derived from a model forward pass
DATA = "data"  # derived from a batch of the data loader
UNBOUND = "unbound"  # a parameter nobody passed a value for
ARGDEFAULT = "argdefault"  # a constant that is only a command-line default
REDUCED = "all_reduced"  # went through dist.all_reduce / accelerator.gather …
REDUCED_SUM = "reduced_sum"  # … with a SUM and no division by the world size yet
REDUCED_AVG = "reduced_avg"
GATHERED = "gathered"  # all ranks' values side by side (all_gather, accelerator.gather)
# what says how a value was reduced across ranks (a divisor's do not carry to the quotient)
REDUCTION_LABELS = frozenset({REDUCED, REDUCED_SUM, REDUCED_AVG, GATHERED, "reduced_other"})
# a summed loss divided by something that is not known to be the world size: the divisor as
# written follows, ``sum_divisor:<constant or empty>:<text>``
SUM_DIVISOR = "sum_divisor:"
# a value from no forward pass (a token or sample count) gathered or reduced across ranks: it
# makes a quotient a global mean, and says nothing of how a loss it later meets was reduced
REDUCED_COUNT = "reduced_count"
ANY_REDUCED = frozenset({REDUCED, REDUCED_COUNT})
UNREAD_PATH = "unread_path"  # passed through a call of code the scan does not read
LOSS_NAMED = "loss_named"  # held in a dict under a key that names a loss (a hint, not a fact)
# one of several functions or objects an undecided ``if`` binds (the other is not in the value)
PICKED = "picked"
DIV_WORLD = "div_world"
MUL_WORLD = "mul_world"
SUM_RED = "red_sum"  # the loss is a sum over samples/tokens
MEAN_RED = "red_mean"  # the loss is a mean over samples/tokens
TOKENS = "tokens"  # a count of tokens / non-masked labels
SIZE = "size"  # a forward output's shape: a count of its samples, not a loss value
GLOBAL_TOKENS = "global_tokens"  # a token count made global (all_reduce / num_items_in_batch)
NORM_GLOBAL = "norm_global"  # a loss divided by a global token count
LEN_DATASET = "len_dataset"
LEN_LOADER = "len_loader"
ITEM = "item"  # a python number taken from a tensor (.item())
# counts of one rank's own batches, samples or tokens: never the world size
COUNT_LABELS = frozenset({LEN_LOADER, LEN_DATASET, TOKENS, DATA})

# Object kinds.
DDP = "ddp"  # DistributedDataParallel (or a framework object that syncs like it)
FSDP = "fsdp"
MODEL = "model"  # an nn.Module that is not (yet) wrapped
DDP_MODULE = "ddp_module"  # ddp.module: the wrapped model reached around the wrapper
MODULE_CLASS = "module_class"
OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
SCALER = "scaler"
RNG = "rng"  # a torch.Generator of its own: seeding it leaves the global RNG as it was
DSAMPLER = "dsampler"
SAMPLER = "sampler"
LOADER = "loader"
DATASET = "dataset"
CRITERION = "criterion"
ACCELERATOR = "accelerator"
TRAINER = "trainer"
PL_TRAINER = "pl_trainer"  # lightning.Trainer / pytorch_lightning.Trainer
TRAINING_ARGS = "training_args"
ARGPARSER = "argparser"
ARGS = "args"  # the namespace parse_args() returns
INSTANCE = "instance"  # an instance of a class defined in the scanned code
PARAMS = "params"  # model.parameters() and friends, or one parameter
CTX_NO_SYNC = "no_sync"
CTX_ACCUMULATE = "accumulate"
CTX_AUTOCAST = "autocast"
CTX_NO_GRAD = "no_grad"
CTX_NULL = "nullcontext"
RANGE = "range"
LAMBDA = "lambda"
FUNCTION = "function"  # a function defined in the scanned code
PARTIAL = "partial"  # functools.partial(f, ...): items = (f, *its args), mapping = its kwargs
# One of several values, chosen by a test the scan cannot decide: items = the alternatives,
# node = the test (``a if test else b``; a helper that returns one of them).
ALTERNATIVES = "ifexp"
# A model's method taken without calling it (``ctx = model.no_sync``): items = (the model,),
# canon = the method's name; calling it later is that method call.
BOUND = "bound"


@dataclass(frozen=True, slots=True)
class Op:
    """One arithmetic step applied to a loss-like value: ``loss / accum`` is ('div', accum)."""

    op: str  # "div" | "mul"
    expr: ast.expr
    val: Val


@dataclass(frozen=True, slots=True)
class Val:
    kind: str | None = None
    ref: int | None = None
    const: Any = NO_CONST
    taint: frozenset[str] = frozenset()
    items: tuple[Val, ...] | None = None
    mapping: tuple[tuple[str, Val], ...] | None = None
    canon: str | None = None  # a symbol's dotted name ("torch.optim.AdamW") or a producer's
    ops: tuple[Op, ...] = ()
    node: ast.AST | None = None

    @property
    def known(self) -> bool:
        """A plain Python constant is known (functions and classes also ride in ``const``)."""
        return isinstance(self.const, _PLAIN)

    def with_taint(self, *labels: str) -> Val:
        return replace(self, taint=self.taint | frozenset(labels))

    def plain(self) -> Val:
        """Only the data-flow part: what a computation on this value inherits."""
        return Val(taint=self.taint, ops=self.ops)

    def get(self, key: str) -> Val | None:
        if self.mapping is None:
            return None
        for k, v in self.mapping:
            if k == key:
                return v
        return None


UNKNOWN = Val()


def merge(*vals: Val) -> Val:
    """The data-flow union of several values (the result of an unknown computation)."""
    taint: frozenset[str] = frozenset()
    ops: tuple[Op, ...] = ()
    for v in vals:
        taint |= v.taint
        if v.ops and len(ops) < 8:
            ops = ops + v.ops[: 8 - len(ops)]
    return Val(taint=taint, ops=ops)


@dataclass
class Obj:
    """An object the script creates: a model, a DDP wrapper, an optimizer, a sampler …"""

    ref: int
    kind: str
    file: str
    line: int
    seq: int  # program-order position of its creation
    canon: str = ""  # the constructor ("torch.optim.AdamW", "local:Net")
    node: ast.AST | None = None
    wraps: int | None = None  # the DDP/FSDP wrapper's inner model
    wrapped_by: int | None = None
    kwargs: dict[str, Val] = field(default_factory=dict)
    args: list[Val] = field(default_factory=list)
    attrs: dict[str, Val] = field(default_factory=dict)  # instance attributes (self.x = …)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def is_reduction_label(t: str) -> bool:
    """A label that says how a value was reduced across ranks."""
    return (
        t in REDUCTION_LABELS
        or t in ("reduced_div_unknown", "double_div_world")
        or t.startswith(SUM_DIVISOR)
    )


def summed_label(val: Val, label: str) -> str:
    """How a reduction of ``val`` with ``label`` leaves it: each rank's share divided by the
    world size before a SUM over the ranks (``x /= world_size; all_reduce(x)``) is their mean.
    (``divworld@`` marks a forward pass's value divided by the world size itself; the plain
    ``div_world`` label also rides on a value divided by a count computed from it.)"""
    divided = any(t.startswith("divworld@") for t in val.taint)
    if label == REDUCED_SUM and divided and REDUCED not in val.taint:
        return REDUCED_AVG
    return label


def reduced(val: Val, label: str) -> frozenset[str]:
    """The taint of ``val`` after a collective with ``label`` (a forward pass's value is
    reduced; anything else is a reduced count)."""
    if FWD not in val.taint:
        return val.taint | {REDUCED_COUNT}
    return val.taint | {REDUCED, summed_label(val, label)}
