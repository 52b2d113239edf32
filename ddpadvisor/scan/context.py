"""What surrounds an event: loops, ``with`` blocks, ``if`` branches and inlined functions."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ddpadvisor.scan.values import Val


@dataclass(frozen=True, slots=True, eq=False)
class LoopCtx:
    node: ast.AST
    file: str
    line: int
    iter: Val
    count: Val | None = None  # range(K): K
    index_var: str | None = None  # name bound to the integer position (range / enumerate)
    over_loader: bool = False
    is_while: bool = False
    count_node: ast.expr | None = None  # range(K)'s K as written, names expanded like conditions
    # DataLoaders (object refs) whose batches this loop's element carries: the loop walks
    # their batches, through enumerate / tqdm / zip / a local generator or wrapper object
    # (loops driven by next() are found by Analysis.loop_loaders).
    loaders: frozenset[int] = frozenset()
    # DataLoaders this loop starts iterating itself (``for b in loader``, ``enumerate(loader)``):
    # each run of the loop is one pass over them.
    starts: frozenset[int] = frozenset()
    outer: tuple[LoopCtx | WithCtx | CondCtx | FuncCtx, ...] = ()  # the context around it
    seq: int = 0  # the walk's position when the loop began

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True, eq=False)
class WithCtx:
    node: ast.AST
    file: str
    line: int
    val: Val
    kind: str | None  # values.CTX_* or None
    # A conditional no_sync (``m.no_sync() if c else nullcontext()``): no_sync applies when
    # ``cond`` (expanded) is true.
    cond: ast.expr | None = None


@dataclass(frozen=True, slots=True, eq=False)
class CondCtx:
    node: ast.AST
    file: str
    line: int
    test: ast.expr  # names replaced by what they were assigned, where known
    branch: bool  # True: inside the body; False: the else branch (or after an early exit)
    taint: frozenset[str] = frozenset()
    const: bool | None = None  # the test's value when the scanner knows it
    # What the test means in the multi-rank job (interp.branches): "all" (holds on every
    # rank), "none" (on no rank: the single-process path), "some" (on some ranks), None.
    job: str | None = None

    @property
    def runs(self) -> str | None:
        """Whether this side runs in the multi-rank job: "all", "none", "some" or None (an
        alternative the scan cannot decide)."""
        if self.job is None or self.job == "some":
            return self.job
        return "all" if (self.job == "all") == self.branch else "none"


@dataclass(frozen=True, slots=True, eq=False)
class FuncCtx:
    name: str
    file: str
    line: int
    call_where: str = ""  # where the inlined function was called from
    self_kind: str | None = None  # the kind of ``self`` for a method called on an object


Ctx = tuple[LoopCtx | WithCtx | CondCtx | FuncCtx, ...]


@dataclass(slots=True)
class Event:
    """A call or an assignment, in program order, with everything around it."""

    seq: int
    kind: str  # "call" | "assign" | "augassign"
    file: str
    line: int
    ctx: Ctx
    node: ast.AST
    name: str = ""  # callee: a dotted symbol ("torch.nn.utils.clip_grad_norm_") or ".method"
    method: str | None = None
    recv: Val | None = None
    args: list[Val] = field(default_factory=list)
    kwargs: dict[str, Val] = field(default_factory=dict)
    result: Val | None = None
    target: str | None = None  # assignments: the target's source text
    attr: str | None = None  # assignments to an attribute: its name
    value: Val | None = None  # assignments: the value
    value_node: ast.expr | None = None
    op: str | None = None  # augassign: "div", "mul", "add", …

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def loops(self) -> list[LoopCtx]:
        return [c for c in self.ctx if isinstance(c, LoopCtx)]

    def withs(self) -> list[WithCtx]:
        return [c for c in self.ctx if isinstance(c, WithCtx)]

    def conds(self) -> list[CondCtx]:
        return [c for c in self.ctx if isinstance(c, CondCtx)]

    def kw(self, name: str, pos: int | None = None) -> Val | None:
        if name in self.kwargs:
            return self.kwargs[name]
        if pos is not None and pos < len(self.args):
            return self.args[pos]
        return None

    def kw_node(self, name: str, pos: int | None = None) -> ast.expr | None:
        call = self.node
        if not isinstance(call, ast.Call):
            return None
        for k in call.keywords:
            if k.arg == name:
                return k.value
        if pos is not None and pos < len(call.args):
            arg = call.args[pos]
            return None if isinstance(arg, ast.Starred) else arg
        return None

    def inside(self, ctx_item: object) -> bool:
        return any(c is ctx_item for c in self.ctx)


def ctx_after(ctx: Ctx, outer: Ctx) -> Ctx:
    """The part of ``ctx`` nested inside ``outer`` (which must be a prefix of it)."""
    if len(ctx) >= len(outer) and all(x is y for x, y in zip(ctx, outer)):
        return ctx[len(outer) :]
    return ctx


def common_prefix(a: Ctx, b: Ctx) -> Ctx:
    n = 0
    for x, y in zip(a, b):
        if x is not y:
            break
        n += 1
    return a[:n]
