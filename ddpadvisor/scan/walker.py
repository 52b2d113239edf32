"""Walk a training script in program order without running it.

The walker is a small abstract interpreter over the ``ast``: it visits statements in the
order Python would run them (each loop body once), inlines calls to functions and methods
defined in the scanned files, and records every call and attribute assignment as an
:class:`Event` together with its context (enclosing loops, ``with`` blocks, ``if`` branches).
Values are :class:`Val` abstractions: object kinds, identities, constants and taint.
The detectors in :mod:`ddpadvisor.scan.detect` read the events; the walker decides nothing.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field, replace
from typing import Any

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import CondCtx, Ctx, Event, FuncCtx, LoopCtx, WithCtx
from ddpadvisor.scan.source import Module, SourceSet
from ddpadvisor.scan.values import NO_CONST, UNKNOWN, Obj, Op, Val, merge

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
}


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
            if name in ("Module", "LightningModule", "PreTrainedModel") or name.endswith("Model"):
                return V.MODEL
            if name.endswith("Dataset"):
                return V.DATASET
            if name.endswith("Sampler"):
                return V.SAMPLER
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


def _always_exits(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Continue, ast.Break, ast.Raise)):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        func = last.value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("exit", "_exit", "quit")
    return False


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


class Walker:
    def __init__(self, sources: SourceSet, budget: int = DEFAULT_BUDGET) -> None:
        self.sources = sources
        self.events: list[Event] = []
        self.objects: dict[int, Obj] = {}
        self.scopes: dict[str, ModuleScope] = {}
        self.seq = 0
        self.budget = budget
        self.truncated = False
        self.stack: list[ast.AST] = []
        self.inlined: dict[int, int] = {}
        self.cached_returns: dict[int, Val] = {}
        self.classes: list[ClassInfo] = []
        self.functions: list[FuncRef] = []
        self.warnings: list[str] = []
        self.rank_slices: list[str] = []  # data[rank::world_size]: a hand-made shard

    # ------------------------------------------------------------------ entry
    def run(self) -> WalkResult:
        main = self._scope(self.sources.main)
        self._walk_module(main)
        # Functions nobody visibly calls (decorated entry points, callbacks handed to a
        # launcher the scanner does not know) are walked once with unknown arguments.
        called = {name.split(".")[-1] for _, name, _ in main.module.index.calls}
        candidates = [r for r in self.functions if r.scope is main]
        # Roots first (functions no code calls by name, e.g. ``main``), latest defined first:
        # walking them inlines their callees, which are then not walked a second time.
        candidates.sort(key=lambda r: (r.name in called, -getattr(r.node, "lineno", 0)))
        for ref in candidates:
            if id(ref.node) in self.inlined:
                continue
            if ref.owner is not None and ref.owner.object_kind() == V.MODEL:
                continue
            if id(ref.node) in main.module.index.interesting_funcs:
                frame = Frame(main, main.globals, main.exprs)
                self.inline(ref, [], {}, None, None, frame, ())
        return WalkResult(
            self.events,
            self.objects,
            self.sources,
            self.sources.warnings + self.warnings,
            self.truncated,
            self.classes,
            self.functions,
            self.rank_slices,
        )

    @staticmethod
    def _interesting(node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr in ("backward", "train", "step"):
                return True
            if isinstance(sub, ast.Name) and sub.id in ("DDP", "DistributedDataParallel"):
                return True
        return False

    def _scope(self, module: Module) -> ModuleScope:
        scope = self.scopes.get(module.name)
        if scope is None:
            scope = ModuleScope(module)
            scope.globals["__name__"] = Val(const=module.name)
            self.scopes[module.name] = scope
        return scope

    def _walk_module(self, scope: ModuleScope) -> None:
        if scope.walked:
            return
        scope.walked = True
        frame = Frame(scope, scope.globals, scope.exprs)
        self.walk_block(scope.module.tree.body, frame, ())

    # ------------------------------------------------------------------ helpers
    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def new_obj(self, kind: str, node: ast.AST, frame: Frame, canon: str = "", **kw: Any) -> Obj:
        ref = len(self.objects) + 1
        obj = Obj(
            ref=ref,
            kind=kind,
            file=frame.scope.module.label,
            line=getattr(node, "lineno", 0),
            seq=self.seq,
            canon=canon,
            node=node,
            **kw,
        )
        self.objects[ref] = obj
        return obj

    def obj(self, val: Val | None) -> Obj | None:
        if val is None or val.ref is None:
            return None
        return self.objects.get(val.ref)

    def lookup(self, name: str, frame: Frame) -> Val:
        f: Frame | None = frame
        while f is not None:
            if name in f.locals:
                return f.locals[name]
            f = f.parent
        if name in frame.scope.globals:
            return frame.scope.globals[name]
        return Val(kind="symbol", canon=name)

    def lookup_expr(self, name: str, frame: Frame) -> ast.expr | None:
        f: Frame | None = frame
        while f is not None:
            if name in f.locals:
                return f.exprs.get(name)
            f = f.parent
        return frame.scope.exprs.get(name)

    def bind_name(self, name: str, val: Val, frame: Frame, expr: ast.expr | None) -> None:
        frame.locals[name] = val
        if expr is not None and _simple_expr(expr, name):
            frame.exprs[name] = expr
        else:
            frame.exprs.pop(name, None)

    def expand(self, expr: ast.expr, frame: Frame, depth: int = 0) -> ast.expr:
        """Replace names by their known constant or the expression last assigned to them.

        Copy-on-write: the source tree is never modified, unchanged sub-trees are shared.
        """
        if isinstance(expr, ast.Name):
            val = self.lookup(expr.id, frame)
            if val.known and isinstance(val.const, (int, float, str, bool)):
                return _constant(val, expr)
            if depth < 4:
                sub = self.lookup_expr(expr.id, frame)
                if sub is not None:
                    return self.expand(sub, frame, depth + 1)
            return expr
        if isinstance(expr, ast.Attribute):
            val = self.eval_pure(expr, frame)
            if val.known and isinstance(val.const, (int, float, str, bool)):
                return _constant(val, expr)
            return expr
        if not isinstance(expr, _EXPANDABLE):
            return expr
        new: ast.expr | None = None
        for name, value in ast.iter_fields(expr):
            if isinstance(value, ast.expr):
                changed = self.expand(value, frame, depth)
                if changed is not value:
                    new = new or copy.copy(expr)
                    setattr(new, name, changed)
            elif isinstance(value, list) and value and isinstance(value[0], ast.expr):
                items = [
                    self.expand(v, frame, depth) if isinstance(v, ast.expr) else v for v in value
                ]
                if any(a is not b for a, b in zip(items, value)):
                    new = new or copy.copy(expr)
                    setattr(new, name, items)
        return new if new is not None else expr

    @staticmethod
    def _at(node: ast.AST, frame: Frame) -> str:
        return f"{frame.scope.module.label}:{getattr(node, 'lineno', 0)}"

    def eval_pure(self, node: ast.expr, frame: Frame) -> Val:
        """Evaluate names and attributes only: never records events."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id, frame)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval_pure(node.value, frame), node.attr, frame)
        if isinstance(node, ast.Constant):
            return Val(const=node.value)
        return UNKNOWN

    # ------------------------------------------------------------------ statements
    def walk_block(self, stmts: list[ast.stmt], frame: Frame, ctx: Ctx) -> None:
        extra: list[CondCtx] = []
        for stmt in stmts:
            if self.budget <= 0:
                self.truncated = True
                return
            self.budget -= 1
            cur = ctx + tuple(extra) if extra else ctx
            self.walk_stmt(stmt, frame, cur)
            if (
                isinstance(stmt, ast.If)
                and not stmt.orelse
                and _always_exits(stmt.body)
                and not _is_main_guard(stmt.test)
            ):
                test_val = self.eval_pure(stmt.test, frame)
                extra.append(
                    CondCtx(
                        stmt,
                        frame.scope.module.label,
                        stmt.lineno,
                        self.expand(stmt.test, frame),
                        False,
                        self._test_taint(stmt.test, frame) | test_val.taint,
                    )
                )

    def walk_stmt(self, stmt: ast.stmt, frame: Frame, ctx: Ctx) -> None:
        label = frame.scope.module.label
        if isinstance(stmt, ast.Expr):
            self.eval(stmt.value, frame, ctx)
        elif isinstance(stmt, ast.Assign):
            val = self.eval(stmt.value, frame, ctx)
            for target in stmt.targets:
                self.assign(target, val, stmt.value, frame, ctx, stmt)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                val = self.eval(stmt.value, frame, ctx)
                self.assign(stmt.target, val, stmt.value, frame, ctx, stmt)
        elif isinstance(stmt, ast.AugAssign):
            self.aug_assign(stmt, frame, ctx)
        elif isinstance(stmt, ast.If):
            self.walk_if(stmt, frame, ctx)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.walk_for(stmt, frame, ctx)
        elif isinstance(stmt, ast.While):
            self._loop_carried(stmt, frame)
            self.eval(stmt.test, frame, ctx)
            loop = LoopCtx(stmt, label, stmt.lineno, UNKNOWN, is_while=True)
            self.walk_block(stmt.body, frame, (*ctx, loop))
            self.walk_block(stmt.orelse, frame, ctx)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.walk_with(stmt, frame, ctx)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.walk_block(stmt.body, frame, ctx)  # type: ignore[attr-defined]
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                self.walk_block(handler.body, frame, ctx)
            self.walk_block(stmt.orelse, frame, ctx)  # type: ignore[attr-defined]
            self.walk_block(stmt.finalbody, frame, ctx)  # type: ignore[attr-defined]
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ref = FuncRef(stmt, frame.scope, frame if frame.name != "<module>" else None)
            self.functions.append(ref)
            val = Val(kind=V.FUNCTION, const=ref, canon=f"local:{stmt.name}")
            for deco in stmt.decorator_list:
                self.eval(deco, frame, ctx)
            self.bind_name(stmt.name, val, frame, None)
        elif isinstance(stmt, ast.ClassDef):
            self.define_class(stmt, frame, ctx)
        elif isinstance(stmt, ast.Return):
            frame.returns.append(self.eval(stmt.value, frame, ctx) if stmt.value else UNKNOWN)
        elif isinstance(stmt, ast.Import):
            self.do_import(stmt, frame)
        elif isinstance(stmt, ast.ImportFrom):
            self.do_import_from(stmt, frame)
        elif isinstance(stmt, (ast.Raise, ast.Assert)):
            for sub in ast.iter_child_nodes(stmt):
                if isinstance(sub, ast.expr):
                    self.eval(sub, frame, ctx)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    frame.locals.pop(target.id, None)
        elif type(stmt).__name__ == "Match":
            self.eval(stmt.subject, frame, ctx)  # type: ignore[attr-defined]
            for case in stmt.cases:  # type: ignore[attr-defined]
                self.walk_block(case.body, frame, ctx)

    def walk_if(self, stmt: ast.If, frame: Frame, ctx: Ctx) -> None:
        if _is_main_guard(stmt.test):
            self.walk_block(stmt.body, frame, ctx)
            return
        test_val = self.eval(stmt.test, frame, ctx)
        const: bool | None = None
        if test_val.known and not isinstance(test_val.const, (list, dict)):
            const = bool(test_val.const)
            # A plain constant switch (``if False:``) is dead code; a command-line default
            # can be overridden, so both branches stay in play.
            if V.ARGDEFAULT not in test_val.taint:
                self.walk_block(stmt.body if const else stmt.orelse, frame, ctx)
                return
        label = frame.scope.module.label
        taint = self._test_taint(stmt.test, frame) | test_val.taint
        expanded = self.expand(stmt.test, frame)
        body = CondCtx(stmt, label, stmt.lineno, expanded, True, taint, const)
        self.walk_block(stmt.body, frame, (*ctx, body))
        if stmt.orelse:
            orelse = CondCtx(stmt, label, stmt.lineno, expanded, False, taint, const)
            self.walk_block(stmt.orelse, frame, (*ctx, orelse))

    def _test_taint(self, test: ast.expr, frame: Frame) -> frozenset[str]:
        """Rank-dependence of an if-test, including helpers named like ``is_main_process()``."""
        out: set[str] = set()
        for sub in ast.walk(test):
            name = None
            if isinstance(sub, ast.Name):
                name = sub.id
            elif isinstance(sub, ast.Attribute):
                name = sub.attr
            if name and (name in _MAIN_PROCESS_NAMES or name in _RANK_NAMES):
                out.add(V.RANK)
        return frozenset(out)

    def _loop_carried(self, loop: ast.For | ast.AsyncFor | ast.While, frame: Frame) -> None:
        """Names the loop body reassigns are not constants inside the loop (``step += 1``)."""
        names: set[str] = set()
        stack: list[ast.AST] = list(loop.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.NamedExpr):
                names.add(node.target.id)
            stack.extend(ast.iter_child_nodes(node))
        for name in names:
            cur = frame.locals.get(name)
            if cur is not None and cur.known:
                frame.locals[name] = replace(cur, const=NO_CONST)
                frame.exprs.pop(name, None)

    def walk_for(self, stmt: ast.For | ast.AsyncFor, frame: Frame, ctx: Ctx) -> None:
        self._loop_carried(stmt, frame)
        it = self.eval(stmt.iter, frame, ctx)
        label = frame.scope.module.label
        count: Val | None = None
        index_var: str | None = None
        over_loader = False
        elem = self.element_of(it, stmt.iter)
        target = stmt.target
        if it.kind == V.RANGE and it.items:
            count = it.items[0]
            if isinstance(target, ast.Name):
                index_var = target.id
        elif it.kind == "sized" and it.items:
            count = it.items[1]
        elif it.kind == "enumerate" and it.items:
            inner = it.items[0]
            over_loader = inner.kind == V.LOADER
            elem = Val(items=(Val(), self.element_of(inner, None)))
            if (
                isinstance(target, ast.Tuple)
                and target.elts
                and isinstance(target.elts[0], ast.Name)
            ):
                index_var = target.elts[0].id
            if inner.kind == V.RANGE and inner.items:
                count = inner.items[0]
            elif inner.kind == "sized" and inner.items:
                count = inner.items[1]
        else:
            over_loader = it.kind == V.LOADER or (V.DATA in it.taint and it.kind != V.RANGE)
        self.assign(target, elem, None, frame, ctx, stmt)
        loop = LoopCtx(stmt, label, stmt.lineno, it, count, index_var, over_loader)
        self.walk_block(stmt.body, frame, (*ctx, loop))
        self.walk_block(stmt.orelse, frame, ctx)

    def element_of(self, it: Val, node: ast.AST | None) -> Val:
        if it.kind == V.LOADER:
            return Val(kind="batch", ref=it.ref, taint=it.taint | {V.DATA})
        if it.kind == V.RANGE:
            return Val(taint=it.taint)
        if it.kind == V.PARAMS:
            return Val(kind=V.PARAMS, ref=it.ref)
        if it.kind == "named_params":
            return Val(items=(Val(), Val(kind=V.PARAMS, ref=it.ref)))
        if it.kind == "param_groups":
            return Val(kind="param_group", ref=it.ref)
        if it.kind in ("generator", "sized") and it.items:
            return it.items[0]
        if it.kind == "zip" and it.items:
            return Val(items=tuple(self.element_of(i, None) for i in it.items))
        if it.kind == "enumerate" and it.items:
            return Val(items=(Val(), self.element_of(it.items[0], None)))
        if it.items:
            return it.items[0] if len(it.items) == 1 else merge(*it.items)
        if it.kind == V.DATASET:
            return Val(taint=it.taint | {V.DATA})
        if it.kind in (None, "state") and not it.known:
            return Val(taint=it.taint | {V.DATA})  # iterating something loaded: a batch
        return it.plain()

    def walk_with(self, stmt: ast.With | ast.AsyncWith, frame: Frame, ctx: Ctx) -> None:
        label = frame.scope.module.label
        new: list[WithCtx] = []
        for item in stmt.items:
            val = self.eval(item.context_expr, frame, ctx)
            kind: str | None = val.kind if val.kind in _CTX_KINDS else None
            cond: ast.expr | None = None
            if val.kind == "ifexp" and val.items and isinstance(val.node, ast.expr):
                yes, no = val.items
                if yes.kind == V.CTX_NO_SYNC and no.kind != V.CTX_NO_SYNC:
                    kind, cond = V.CTX_NO_SYNC, val.node
                elif no.kind == V.CTX_NO_SYNC and yes.kind != V.CTX_NO_SYNC:
                    kind = V.CTX_NO_SYNC
                    cond = ast.UnaryOp(op=ast.Not(), operand=val.node)
                elif yes.kind == no.kind:
                    kind = yes.kind if yes.kind in _CTX_KINDS else None
                    val = yes
            new.append(WithCtx(stmt, label, stmt.lineno, val, kind, cond))
            if item.optional_vars is not None:
                self.assign(item.optional_vars, val.plain(), None, frame, ctx, stmt)
        self.walk_block(stmt.body, frame, (*ctx, *new))

    def assign(
        self,
        target: ast.expr,
        val: Val,
        value_node: ast.expr | None,
        frame: Frame,
        ctx: Ctx,
        stmt: ast.AST,
    ) -> None:
        if isinstance(target, ast.Name):
            self.bind_name(target.id, val, frame, value_node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            items = val.items
            if isinstance(value_node, (ast.Tuple, ast.List)) and len(value_node.elts) == len(elts):
                nodes: list[ast.expr | None] = list(value_node.elts)
            else:
                nodes = [None] * len(elts)
            if (
                items is not None
                and len(items) == len(elts)
                and not any(isinstance(e, ast.Starred) for e in elts)
            ):
                for elt, item, node in zip(elts, items, nodes):
                    self.assign(elt, item, node, frame, ctx, stmt)
            else:
                for elt in elts:
                    inner = elt.value if isinstance(elt, ast.Starred) else elt
                    self.assign(inner, val.plain(), None, frame, ctx, stmt)
        elif isinstance(target, ast.Attribute):
            base = self.eval(target.value, frame, ctx)
            obj = self.obj(base)
            if obj is not None:
                obj.attrs[target.attr] = val
            self.events.append(
                Event(
                    self.next_seq(),
                    "assign",
                    frame.scope.module.label,
                    getattr(stmt, "lineno", 0),
                    ctx,
                    stmt,
                    recv=base,
                    target=ast.unparse(target)[:120],
                    attr=target.attr,
                    value=val,
                    value_node=self.expand(value_node, frame) if value_node is not None else None,
                )
            )
        elif isinstance(target, ast.Subscript):
            base = self.eval(target.value, frame, ctx)
            key = self.eval(target.slice, frame, ctx)
            self.events.append(
                Event(
                    self.next_seq(),
                    "assign",
                    frame.scope.module.label,
                    getattr(stmt, "lineno", 0),
                    ctx,
                    stmt,
                    recv=base,
                    target=ast.unparse(target)[:120],
                    attr=str(key.const) if key.known else None,
                    value=val,
                    value_node=value_node,
                )
            )
        elif isinstance(target, ast.Starred):
            self.assign(target.value, val.plain(), None, frame, ctx, stmt)

    def aug_assign(self, stmt: ast.AugAssign, frame: Frame, ctx: Ctx) -> None:
        cur = (
            self.eval(stmt.target, frame, ctx)
            if not isinstance(stmt.target, ast.Subscript)
            else UNKNOWN
        )
        rhs = self.eval(stmt.value, frame, ctx)
        result = self.binop(stmt.op, cur, rhs, stmt.value, at=self._at(stmt, frame))
        op = _AUG_OPS.get(type(stmt.op), "other")
        if isinstance(stmt.target, ast.Name):
            frame.locals[stmt.target.id] = result
            frame.exprs.pop(stmt.target.id, None)
        elif isinstance(stmt.target, ast.Attribute):
            obj = self.obj(self.eval_pure(stmt.target.value, frame))
            if obj is not None:
                obj.attrs[stmt.target.attr] = result
        self.events.append(
            Event(
                self.next_seq(),
                "augassign",
                frame.scope.module.label,
                stmt.lineno,
                ctx,
                stmt,
                target=ast.unparse(stmt.target)[:120],
                value=rhs,
                value_node=stmt.value,
                op=op,
                result=result,
            )
        )

    # ------------------------------------------------------------------ imports
    def do_import(self, stmt: ast.Import, frame: Frame) -> None:
        for alias in stmt.names:
            sibling = self.sources.resolve(alias.name)
            if sibling is not None:
                scope = self._scope(sibling)
                self._walk_module(scope)
                if alias.asname:
                    frame.locals[alias.asname] = Val(kind="module", const=scope)
                else:
                    top = alias.name.split(".")[0]
                    top_mod = self.sources.resolve(top)
                    frame.locals[top] = (
                        Val(kind="module", const=self._scope(top_mod))
                        if top_mod is not None
                        else Val(kind="symbol", canon=top)
                    )
                continue
            if alias.asname:
                frame.locals[alias.asname] = Val(kind="symbol", canon=alias.name)
            else:
                top = alias.name.split(".")[0]
                frame.locals[top] = Val(kind="symbol", canon=top)

    def do_import_from(self, stmt: ast.ImportFrom, frame: Frame) -> None:
        modname = stmt.module or ""
        if stmt.level:
            # Relative imports resolve against the script folder (the scanned package root).
            base = (
                frame.scope.module.name.split(".")[: -stmt.level]
                if frame.scope.module.name != "__main__"
                else []
            )
            modname = ".".join([*base, modname] if modname else base)
        sibling = self.sources.resolve(modname) if modname else None
        scope = self._scope(sibling) if sibling is not None else None
        if scope is not None:
            self._walk_module(scope)
        for alias in stmt.names:
            local = alias.asname or alias.name
            if alias.name == "*":
                if scope is not None:
                    for k, v in scope.globals.items():
                        if not k.startswith("_"):
                            frame.locals[k] = v
                continue
            if scope is not None and alias.name in scope.globals:
                frame.locals[local] = scope.globals[alias.name]
                continue
            sub = self.sources.resolve(f"{modname}.{alias.name}" if modname else alias.name)
            if sub is not None:
                sub_scope = self._scope(sub)
                self._walk_module(sub_scope)
                frame.locals[local] = Val(kind="module", const=sub_scope)
                continue
            canon = f"{modname}.{alias.name}" if modname else alias.name
            frame.locals[local] = Val(kind="symbol", canon=canon)

    # ------------------------------------------------------------------ classes
    def define_class(self, stmt: ast.ClassDef, frame: Frame, ctx: Ctx) -> None:
        bases = [self.eval(b, frame, ctx) for b in stmt.bases]
        info = ClassInfo(stmt, frame.scope, bases)
        for deco in stmt.decorator_list:
            text = ast.unparse(deco)
            if "dataclass" in text:
                info.is_dataclass = True
        for item in stmt.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                info.methods[item.name] = item
                ref = FuncRef(item, frame.scope, None, owner=info)
                self.functions.append(ref)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                info.fields.append(item.target.id)
                if item.value is not None:
                    info.attrs[item.target.id] = self._field_default(item.value, frame, ctx)
            elif isinstance(item, ast.Assign):
                val = self.eval(item.value, frame, ctx)
                for t in item.targets:
                    if isinstance(t, ast.Name):
                        info.attrs[t.id] = val
        self.classes.append(info)
        self.bind_name(
            stmt.name, Val(kind="class", const=info, canon=f"local:{stmt.name}"), frame, None
        )

    def _field_default(self, value: ast.expr, frame: Frame, ctx: Ctx) -> Val:
        # dataclasses.field(default=…) / field(default_factory=…)
        if (
            isinstance(value, ast.Call)
            and getattr(value.func, "id", getattr(value.func, "attr", "")) == "field"
        ):
            for k in value.keywords:
                if k.arg == "default":
                    return self.eval(k.value, frame, ctx)
            return UNKNOWN
        return self.eval(value, frame, ctx)

    def instantiate(self, info: ClassInfo, ev: Event, frame: Frame, ctx: Ctx) -> Val:
        kind = info.object_kind()
        obj = self.new_obj(kind, ev.node, frame, canon=f"local:{info.name}", kwargs=dict(ev.kwargs))
        obj.extra["class"] = info
        inst = Val(kind=kind, ref=obj.ref, canon=f"local:{info.name}")
        if info.is_dataclass:
            names = [f for cls in reversed(info.mro()) for f in cls.fields]
            for name in names:
                default = info.find_attr(name)
                if default is not None:
                    obj.attrs[name] = default
            for name, val in zip(names, ev.args):
                obj.attrs[name] = val
            obj.attrs.update(ev.kwargs)
        found = info.find_method("__init__")
        if found is not None:
            owner, init = found
            ref = FuncRef(init, owner.scope, None, owner=owner)
            call_node = ev.node if isinstance(ev.node, ast.Call) else None
            self.inline(ref, ev.args, ev.kwargs, inst, call_node, frame, ctx)
        return inst

    # ------------------------------------------------------------------ functions
    def inline(
        self,
        ref: FuncRef,
        args: list[Val],
        kwargs: dict[str, Val],
        self_val: Val | None,
        call_node: ast.Call | None,
        caller: Frame,
        ctx: Ctx,
    ) -> Val:
        fn = ref.node
        key = id(fn)
        if fn in self.stack or len(self.stack) >= MAX_DEPTH:
            return UNKNOWN
        count = self.inlined.get(key, 0)
        if count >= MAX_INLINES_PER_FUNCTION:
            return self.cached_returns.get(key, UNKNOWN)
        if self.budget <= 0:
            self.truncated = True
            return UNKNOWN
        self.inlined[key] = count + 1
        frame = Frame(ref.scope, {}, {}, ref.closure, ref.name)
        self._bind_params(fn.args, args, kwargs, self_val, call_node, frame, caller, ctx)
        self.stack.append(fn)
        label = ref.scope.module.label
        call_where = (
            f"{caller.scope.module.label}:{call_node.lineno}" if call_node is not None else ""
        )
        func_ctx = FuncCtx(
            ref.name,
            label,
            getattr(fn, "lineno", 0),
            call_where,
            self_val.kind if self_val is not None else None,
        )
        inner: Ctx = (*ctx, func_ctx)
        if isinstance(fn, ast.Lambda):
            frame.returns.append(self.eval(fn.body, frame, inner))
        else:
            self.walk_block(fn.body, frame, inner)
        self.stack.pop()
        if frame.yields:
            result = Val(kind="generator", items=(union(frame.yields),))
        else:
            result = union(frame.returns) if frame.returns else UNKNOWN
        self.cached_returns[key] = result
        return result

    def _bind_params(
        self,
        a: ast.arguments,
        args: list[Val],
        kwargs: dict[str, Val],
        self_val: Val | None,
        call_node: ast.Call | None,
        frame: Frame,
        caller: Frame,
        ctx: Ctx,
    ) -> None:
        params = [*a.posonlyargs, *a.args]
        arg_nodes: list[ast.expr | None] = []
        kw_nodes: dict[str, ast.expr] = {}
        if call_node is not None:
            arg_nodes = [None if isinstance(n, ast.Starred) else n for n in call_node.args]
            kw_nodes = {k.arg: k.value for k in call_node.keywords if k.arg}
        pos = list(args)
        if self_val is not None and params:
            frame.locals[params[0].arg] = self_val
            params = params[1:]
        defaults: list[ast.expr | None] = [None] * (
            len([*a.posonlyargs, *a.args]) - len(a.defaults)
        )
        defaults += list(a.defaults)
        if self_val is not None:
            defaults = defaults[1:]
        for i, p in enumerate(params):
            node: ast.expr | None = None
            if i < len(pos):
                val = pos[i]
                node = arg_nodes[i] if i < len(arg_nodes) else None
            elif p.arg in kwargs:
                val = kwargs[p.arg]
                node = kw_nodes.get(p.arg)
            elif i < len(defaults) and defaults[i] is not None:
                val = self.eval(defaults[i], frame, ctx)  # type: ignore[arg-type]
            else:
                val = self.unbound(p.arg)
            frame.locals[p.arg] = val
            if node is not None and _simple_expr(node, p.arg):
                expanded = self.expand(node, caller)
                if _simple_expr(expanded, p.arg):
                    frame.exprs[p.arg] = expanded
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            if p.arg in kwargs:
                frame.locals[p.arg] = kwargs[p.arg]
            elif d is not None:
                frame.locals[p.arg] = self.eval(d, frame, ctx)
            else:
                frame.locals[p.arg] = self.unbound(p.arg)
        if a.vararg is not None:
            frame.locals[a.vararg.arg] = Val(items=tuple(pos[len(params) :]))
        if a.kwarg is not None:
            named = {p.arg for p in [*params, *a.kwonlyargs]}
            rest = tuple((k, v) for k, v in kwargs.items() if k not in named)
            frame.locals[a.kwarg.arg] = Val(mapping=rest)

    def unbound(self, name: str) -> Val:
        """A parameter nobody passed: guess only its role from its name, never a value."""
        low = name.lower()
        taint = {V.UNBOUND}
        kind: str | None = None
        if low in _RANK_NAMES:
            taint.add(V.RANK)
        elif low in _WORLD_NAMES:
            taint.add(V.WORLD)
        elif low in ("optimizer", "optim", "opt") or low.endswith("optimizer"):
            kind = V.OPTIMIZER
        elif low in ("scheduler", "lr_scheduler", "sched"):
            kind = V.SCHEDULER
        elif low in ("scaler", "grad_scaler"):
            kind = V.SCALER
        elif low in ("accelerator",):
            kind = V.ACCELERATOR
        elif low in ("train_loader", "loader", "dataloader", "train_dataloader", "data_loader"):
            kind = V.LOADER
        elif low in ("criterion", "loss_fn", "loss_fct", "loss_func"):
            kind = V.CRITERION
        return Val(kind=kind, taint=frozenset(taint))

    # ------------------------------------------------------------------ expressions
    def eval(self, node: ast.expr | None, frame: Frame, ctx: Ctx) -> Val:
        if node is None:
            return UNKNOWN
        if isinstance(node, ast.Constant):
            return Val(const=node.value, node=node)
        if isinstance(node, ast.Name):
            return self.lookup(node.id, frame)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval(node.value, frame, ctx), node.attr, frame)
        if isinstance(node, ast.Call):
            return self.eval_call(node, frame, ctx)
        if isinstance(node, ast.BinOp):
            left = self.eval(node.left, frame, ctx)
            right = self.eval(node.right, frame, ctx)
            return self.binop(node.op, left, right, node.right, node.left, at=self._at(node, frame))
        if isinstance(node, ast.UnaryOp):
            inner = self.eval(node.operand, frame, ctx)
            if inner.known:
                try:
                    if isinstance(node.op, ast.Not):
                        return replace(inner, const=not inner.const, kind=None, ref=None)
                    if isinstance(node.op, ast.USub):
                        return replace(inner, const=-inner.const, kind=None, ref=None)
                except TypeError:
                    pass
            return inner.plain()
        if isinstance(node, ast.BoolOp):
            vals = [self.eval(v, frame, ctx) for v in node.values]
            return self._boolop(node, vals)
        if isinstance(node, ast.Compare):
            vals = [
                self.eval(node.left, frame, ctx),
                *(self.eval(c, frame, ctx) for c in node.comparators),
            ]
            out = merge(*vals)
            if all(v.known for v in vals):
                from ddpadvisor.scan.evaluate import Undecidable, evaluate

                try:
                    const = evaluate(
                        ast.Compare(
                            left=ast.Constant(vals[0].const),
                            ops=node.ops,
                            comparators=[ast.Constant(v.const) for v in vals[1:]],
                        )
                    )
                    return replace(out, const=const)
                except Undecidable:
                    pass
            return Val(taint=out.taint)
        if isinstance(node, ast.IfExp):
            test = self.eval(node.test, frame, ctx)
            yes = self.eval(node.body, frame, ctx)
            no = self.eval(node.orelse, frame, ctx)
            if test.known and V.ARGDEFAULT not in test.taint:
                return yes if test.const else no
            if yes.kind in _CTX_KINDS or no.kind in _CTX_KINDS:
                return Val(kind="ifexp", items=(yes, no), node=self.expand(node.test, frame))
            if yes.kind is not None and yes.kind == no.kind:
                return replace(yes, taint=yes.taint | no.taint | test.taint)
            picked = yes if yes.kind is not None else no
            if picked.kind is not None:
                return replace(picked, taint=yes.taint | no.taint)
            return merge(yes, no)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items: list[Val] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    inner = self.eval(e.value, frame, ctx)
                    items.extend(inner.items or (inner.plain(),))
                else:
                    items.append(self.eval(e, frame, ctx))
            tconst: Any = NO_CONST
            if all(i.known for i in items):
                tconst = tuple(i.const for i in items)
            return Val(items=tuple(items), const=tconst, taint=merge(*items).taint)
        if isinstance(node, ast.Dict):
            pairs: list[tuple[str, Val]] = []
            for k, v in zip(node.keys, node.values):
                val = self.eval(v, frame, ctx)
                if k is None:
                    pairs.extend(val.mapping or ())
                    continue
                key = self.eval(k, frame, ctx)
                if key.known:
                    pairs.append((str(key.const), val))
            return Val(mapping=tuple(pairs), taint=merge(*(v for _, v in pairs)).taint)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, frame, ctx)
        if isinstance(node, ast.JoinedStr):
            parts = [self.eval(v, frame, ctx) for v in node.values]
            return merge(*parts)
        if isinstance(node, ast.FormattedValue):
            return self.eval(node.value, frame, ctx)
        if isinstance(node, ast.Lambda):
            ref = FuncRef(node, frame.scope, frame)
            return Val(kind=V.LAMBDA, const=ref, node=node)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node, frame, ctx)
        if isinstance(node, ast.NamedExpr):
            val = self.eval(node.value, frame, ctx)
            self.bind_name(node.target.id, val, frame, node.value)
            return val
        if isinstance(node, ast.Starred):
            return self.eval(node.value, frame, ctx)
        if isinstance(node, ast.Await):
            return self.eval(node.value, frame, ctx)
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            val = self.eval(node.value, frame, ctx) if node.value is not None else UNKNOWN
            if isinstance(node, ast.YieldFrom):
                val = self.element_of(val, None)
            frame.yields.append(val)
            return UNKNOWN
        if isinstance(node, ast.Slice):
            return merge(
                *(self.eval(x, frame, ctx) for x in (node.lower, node.upper, node.step) if x)
            )
        return UNKNOWN

    def _boolop(self, node: ast.BoolOp, vals: list[Val]) -> Val:
        out = merge(*vals)
        if all(v.known for v in vals):
            const: Any = isinstance(node.op, ast.And)
            for v in vals:
                const = v.const
                if isinstance(node.op, ast.And) and not const:
                    break
                if isinstance(node.op, ast.Or) and const:
                    break
            taint = out.taint
            return Val(const=const, taint=taint)
        return Val(taint=out.taint)

    def comprehension(self, node: ast.AST, frame: Frame, ctx: Ctx) -> Val:
        sub = Frame(frame.scope, {}, {}, frame, frame.name)
        its: list[Val] = []
        for gen in node.generators:  # type: ignore[attr-defined]
            it = self.eval(gen.iter, sub, ctx)
            its.append(it)
            self.assign(gen.target, self.element_of(it, gen.iter), None, sub, ctx, node)
            for cond in gen.ifs:
                self.eval(cond, sub, ctx)
        if isinstance(node, ast.DictComp):
            return merge(self.eval(node.key, sub, ctx), self.eval(node.value, sub, ctx))
        elt = self.eval(node.elt, sub, ctx)  # type: ignore[attr-defined]
        if elt.kind == V.PARAMS:
            return Val(kind=V.PARAMS, ref=elt.ref)
        count = _count_of(its[0]) if len(its) == 1 else None
        if count is not None:
            # [b for _, b in zip(range(K), it)]: a list of K items (micro-batches).
            return Val(kind="sized", items=(elt, count), taint=elt.taint)
        return Val(items=(elt,), taint=elt.taint)

    def binop(
        self,
        op: ast.operator,
        left: Val,
        right: Val,
        right_node: ast.expr | None,
        left_node: ast.expr | None = None,
        at: str | None = None,
    ) -> Val:
        if left.known and right.known:
            from ddpadvisor.scan.evaluate import Undecidable, evaluate

            try:
                const = evaluate(ast.BinOp(ast.Constant(left.const), op, ast.Constant(right.const)))
                return Val(const=const, taint=left.taint | right.taint)
            except Undecidable:
                pass
        taint = set(left.taint | right.taint)
        ops = left.ops
        if isinstance(op, (ast.Div, ast.FloorDiv)):
            if V.FWD in left.taint and right_node is not None and len(ops) < 8:
                ops = (*ops, Op("div", right_node, right))
            if V.WORLD in right.taint:
                taint.add(V.DIV_WORLD)
                taint.discard(V.REDUCED_SUM)
                taint.discard("reduced_div_unknown")
                if V.REDUCED_AVG in left.taint:
                    taint.add("double_div_world")
            elif V.REDUCED in right.taint and V.REDUCED in left.taint:
                # A summed total over a summed count: a correct global mean.
                taint.discard(V.REDUCED_SUM)
            elif V.REDUCED_SUM in left.taint:
                # Divided by something else (often a hard-coded world size): undecidable.
                taint.discard(V.REDUCED_SUM)
                taint.add("reduced_div_unknown")
            if V.FWD in left.taint and V.FWD not in right.taint:
                if V.GLOBAL_TOKENS in right.taint:
                    taint.add(V.NORM_GLOBAL)
                    taint.discard(V.SUM_RED)
                    taint.add(V.MEAN_RED)
                elif V.SUM_RED in left.taint and (V.TOKENS in right.taint or V.DATA in right.taint):
                    taint.discard(V.SUM_RED)
                    taint.add(V.MEAN_RED)
            if V.WORLD in right.taint and V.WORLD not in left.taint:
                taint.discard(V.WORLD)  # x / world_size undoes a world-size scaling
        elif isinstance(op, ast.Mult):
            fwd_side, other, other_node = (
                (left, right, right_node) if V.FWD in left.taint else (right, left, left_node)
            )
            if V.FWD in fwd_side.taint and other_node is not None and len(ops) < 8:
                ops = (*fwd_side.ops, Op("mul", other_node, other))
            if V.FWD in fwd_side.taint and V.WORLD in other.taint and V.FWD not in other.taint:
                taint.add(V.MUL_WORLD)
                if at:
                    taint.add(f"mulworld@{at}")
            elif V.WORLD in taint and V.FWD not in taint and at:
                taint.add(f"scaled@{at}")
        elif (
            isinstance(op, ast.Pow) and V.WORLD in left.taint and right.known and right.const == 0.5
        ):
            taint.add("sqrt_world")
            if at:
                taint.add(f"scaled@{at}")
        return Val(taint=frozenset(taint), ops=ops)

    def subscript(self, node: ast.Subscript, frame: Frame, ctx: Ctx) -> Val:
        base = self.eval(node.value, frame, ctx)
        key = self.eval(node.slice, frame, ctx)
        if base.canon == "os.environ" and key.known:
            return self._env(str(key.const), None)
        if key.known and base.mapping is not None:
            got = base.get(str(key.const))
            if got is not None:
                return got
        if (
            key.known
            and base.items is not None
            and isinstance(key.const, int)
            and -len(base.items) <= key.const < len(base.items)
        ):
            return base.items[key.const]
        if base.kind == "batch":
            return Val(taint=base.taint | key.taint)
        if base.kind in _MODEL_KINDS:
            return Val(kind=base.kind, ref=base.ref)  # model.layers[3]: still (part of) the model
        if base.kind == "named_params" or base.kind == V.PARAMS:
            return Val(kind=V.PARAMS, ref=base.ref)
        if isinstance(node.slice, ast.Slice):
            sl = node.slice
            lower = self.eval_pure(sl.lower, frame) if sl.lower is not None else UNKNOWN
            step = self.eval_pure(sl.step, frame) if sl.step is not None else UNKNOWN
            if V.RANK in lower.taint and V.WORLD in step.taint:
                self.rank_slices.append(self._at(node, frame))
            return replace(base.plain(), taint=base.taint | key.taint)
        return merge(base, key)

    def _env(self, key: str, default: Val | None) -> Val:
        if key in _RANK_ENV:
            return Val(taint=frozenset({V.RANK}))
        if key in _WORLD_ENV:
            return Val(taint=frozenset({V.WORLD}))
        if default is not None and default.known:
            return Val(const=default.const, taint=frozenset({V.ARGDEFAULT}))
        return Val(taint=frozenset({"env"}))

    def attribute(self, base: Val, name: str, frame: Frame) -> Val:
        kind = base.kind
        if kind == "symbol":
            return Val(kind="symbol", canon=f"{base.canon}.{name}")
        if kind == "module" and isinstance(base.const, ModuleScope):
            scope = base.const
            if name in scope.globals:
                return scope.globals[name]
            sub = self.sources.resolve(f"{scope.module.name}.{name}")
            if sub is not None:
                sub_scope = self._scope(sub)
                self._walk_module(sub_scope)
                return Val(kind="module", const=sub_scope)
            return Val(kind="symbol", canon=f"{scope.module.name}.{name}")
        if kind == "class" and isinstance(base.const, ClassInfo):
            info = base.const
            found = info.find_method(name)
            if found is not None:
                ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
                return Val(kind=V.FUNCTION, const=ref, canon=f"local:{info.name}.{name}")
            attr = info.find_attr(name)
            return attr if attr is not None else UNKNOWN
        obj = self.obj(base)
        if obj is not None:
            if name in obj.attrs:
                got = obj.attrs[name]
                if kind in _MODEL_KINDS and got.kind in _MODEL_KINDS:
                    # A sub-module stands for the whole model it belongs to: what matters
                    # is which model (and whether reached around DDP), not which layer.
                    return Val(kind=kind, ref=base.ref)
                return got
            cinfo = obj.extra.get("class")
            if isinstance(cinfo, ClassInfo):
                found = cinfo.find_method(name)
                if found is not None:
                    ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
                    return Val(
                        kind="method", const=ref, items=(base,), canon=f"local:{cinfo.name}.{name}"
                    )
                attr = cinfo.find_attr(name)
                if attr is not None:
                    return attr
            if kind == V.ARGS:
                return self._arg_default(obj, name)
            if (
                kind
                in (
                    V.TRAINING_ARGS,
                    V.TRAINER,
                    V.ACCELERATOR,
                    V.OPTIMIZER,
                    V.LOADER,
                    V.DSAMPLER,
                )
                and name in obj.kwargs
            ):
                return obj.kwargs[name]
        if kind == V.DDP:
            if name == "module":
                inner = obj.wraps if obj is not None else None
                return Val(kind=V.DDP_MODULE, ref=inner if inner is not None else base.ref)
            return Val(kind=V.DDP, ref=base.ref) if name not in apis.MODEL_DATA_ATTRS else UNKNOWN
        if kind in (V.MODEL, V.DDP_MODULE, V.FSDP):
            if name in ("module", "_orig_mod", "base_model", "model") and kind == V.FSDP:
                return Val(kind=V.DDP_MODULE, ref=obj.wraps if obj and obj.wraps else base.ref)
            if name in apis.MODEL_DATA_ATTRS:
                return Val(kind=V.PARAMS, ref=base.ref) if name in ("weight", "bias") else UNKNOWN
            return Val(kind=kind, ref=base.ref)
        if kind == V.PARAMS:
            return Val(kind=V.PARAMS, ref=base.ref)
        if kind == V.OPTIMIZER and name == "param_groups":
            return Val(kind="param_groups", ref=base.ref)
        if kind == V.ACCELERATOR:
            if name in (
                "is_main_process",
                "is_local_main_process",
                "process_index",
                "local_process_index",
            ):
                return Val(taint=frozenset({V.RANK}))
            if name == "num_processes":
                return Val(taint=frozenset({V.WORLD}))
        if kind == V.LOADER and name == "sampler" and obj is not None:
            return obj.kwargs.get("sampler", Val(kind=V.SAMPLER))
        if kind == V.LOADER and name == "dataset" and obj is not None:
            return obj.kwargs.get("dataset", obj.args[0] if obj.args else UNKNOWN)
        if base.mapping is not None:
            mapped = base.get(name)
            if mapped is not None:
                return mapped
        if name in _MAIN_PROCESS_NAMES or name in _RANK_NAMES:
            return Val(taint=base.taint | {V.RANK})
        if name in _WORLD_NAMES:
            return Val(taint=base.taint | {V.WORLD})
        if name == "num_items_in_batch":
            return Val(taint=base.taint | {V.GLOBAL_TOKENS})
        out = base.plain()
        if name == "loss" and V.FWD in base.taint:
            out = out.with_taint(V.MEAN_RED)
        return out

    def _arg_default(self, parser_ns: Obj, name: str) -> Val:
        parser = self.objects.get(parser_ns.extra.get("parser", -1))
        taint: set[str] = set()
        if name.lower() in _RANK_NAMES:
            taint.add(V.RANK)
        if name.lower() in _WORLD_NAMES:
            taint.add(V.WORLD)
        if parser is not None:
            defaults: dict[str, Val] = parser.extra.get("defaults", {})
            if name in defaults:
                got = defaults[name]
                return replace(got, taint=got.taint | taint | {V.ARGDEFAULT})
        return Val(taint=frozenset(taint | {"cli"}))

    # ------------------------------------------------------------------ calls
    def eval_call(self, node: ast.Call, frame: Frame, ctx: Ctx) -> Val:
        func = node.func
        recv: Val | None = None
        method: str | None = None
        if isinstance(func, ast.Attribute):
            recv = self.eval(func.value, frame, ctx)
            method = func.attr
            fval = (
                self.attribute(recv, method, frame)
                if recv.kind
                in (
                    "symbol",
                    "module",
                    "class",
                    V.INSTANCE,
                    V.MODEL,
                    V.DATASET,
                    V.SAMPLER,
                    V.DDP_MODULE,
                )
                else UNKNOWN
            )
            if fval.kind in _MODEL_KINDS and recv.kind in _MODEL_KINDS:
                fval = UNKNOWN  # a method on a model: handled by model_method
        else:
            fval = self.eval(func, frame, ctx)
        args: list[Val] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                inner = self.eval(a.value, frame, ctx)
                args.extend(inner.items or (inner.plain(),))
            else:
                args.append(self.eval(a, frame, ctx))
        kwargs: dict[str, Val] = {}
        for k in node.keywords:
            val = self.eval(k.value, frame, ctx)
            if k.arg is None:
                kwargs.update(dict(val.mapping or ()))
            else:
                kwargs[k.arg] = val
        if (fval.kind == "symbol" and fval.canon) or (
            fval.kind in (V.FUNCTION, "class", "method") and fval.canon
        ):
            name = fval.canon
        elif method:
            name = "." + method
        else:
            name = ""
        ev = Event(
            self.next_seq(),
            "call",
            frame.scope.module.label,
            node.lineno,
            ctx,
            node,
            name=name,
            method=method,
            recv=recv,
            args=args,
            kwargs=kwargs,
        )
        self.events.append(ev)
        result = self.call_semantics(ev, fval, frame, ctx)
        ev.result = result
        return result

    def call_semantics(self, ev: Event, fval: Val, frame: Frame, ctx: Ctx) -> Val:
        node = ev.node
        assert isinstance(node, ast.Call)
        if fval.kind in (V.FUNCTION, V.LAMBDA) and isinstance(fval.const, FuncRef):
            owner = fval.const.owner
            if owner is not None and ev.method and ev.recv is not None and ev.recv.kind == "class":
                # ClassName.method(...) on a local class: a static or class method call.
                pass
            return self.inline(fval.const, ev.args, ev.kwargs, None, node, frame, ctx)
        if fval.kind == "method" and isinstance(fval.const, FuncRef) and fval.items:
            self_val = fval.items[0]
            result = self.inline(fval.const, ev.args, ev.kwargs, self_val, node, frame, ctx)
            if self_val.kind in _MODEL_KINDS and ev.method == "forward":
                return self.forward(self_val, ev)
            return result
        if fval.kind == "class" and isinstance(fval.const, ClassInfo):
            return self.instantiate(fval.const, ev, frame, ctx)
        recv = ev.recv
        if recv is not None and ev.method and recv.kind not in ("symbol", "module", "class"):
            # ``self.model(x)``: an object attribute that holds a model or a criterion.
            if fval.kind in _MODEL_KINDS and recv.kind not in _MODEL_KINDS:
                return self.forward(fval, ev)
            if fval.kind == V.CRITERION:
                return self.criterion_call(fval, ev)
            return self.method_call(ev, recv, ev.method, frame, ctx)
        if fval.kind == "symbol" and fval.canon:
            from ddpadvisor.scan.library import symbol_call

            return symbol_call(self, ev, fval.canon, frame, ctx)
        if fval.kind in _MODEL_KINDS:
            return self.forward(fval, ev)
        if fval.kind == V.CRITERION:
            return self.criterion_call(fval, ev)
        if fval.kind == V.INSTANCE:
            obj = self.obj(fval)
            info = obj.extra.get("class") if obj else None
            if isinstance(info, ClassInfo):
                found = info.find_method("__call__")
                if found is not None:
                    ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
                    return self.inline(ref, ev.args, ev.kwargs, fval, node, frame, ctx)
        return merge(*ev.args, *ev.kwargs.values())

    def forward(self, model: Val, ev: Event) -> Val:
        route = model.kind or "unknown"
        base = merge(*ev.args, *ev.kwargs.values())
        taint = base.taint | {V.FWD, f"route:{route}", f"model:{model.ref}", f"fwdseq:{ev.seq}"}
        obj = self.obj(model)
        if obj is not None and "hf_class" in obj.extra and "labels" in ev.kwargs:
            taint |= {V.MEAN_RED}
        return Val(taint=frozenset(taint))

    def criterion_call(self, crit: Val, ev: Event) -> Val:
        base = merge(*ev.args, *ev.kwargs.values())
        obj = self.obj(crit)
        red = "mean"
        if obj is not None:
            r = obj.kwargs.get("reduction")
            if r is not None:
                red = str(r.const) if r.known else "unknown"
        taint = set(base.taint)
        if red == "sum":
            taint.add(V.SUM_RED)
        elif red == "mean":
            taint.add(V.MEAN_RED)
        return Val(taint=frozenset(taint), ops=base.ops)

    def method_call(self, ev: Event, recv: Val, method: str, frame: Frame, ctx: Ctx) -> Val:
        from ddpadvisor.scan.library import method_call

        return method_call(self, ev, recv, method, frame, ctx)

    def rebind(self, target: ast.expr, val: Val, frame: Frame) -> None:
        """In-place operations (``dist.all_reduce(t)``) change what a name holds."""
        if isinstance(target, ast.Name):
            frame.locals[target.id] = val
        elif isinstance(target, ast.Attribute):
            obj = self.obj(self.eval_pure(target.value, frame))
            if obj is not None:
                obj.attrs[target.attr] = val


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
