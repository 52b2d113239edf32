"""The interpreter's state and the helpers both halves use (names, objects, events).

Statements (:mod:`.statements`) and expressions (:mod:`.expressions`) call each other; the
methods each half supplies to the other are declared here for the type checker."""

from __future__ import annotations

import ast
import copy
from typing import TYPE_CHECKING, Any

from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Ctx, Event, LoopCtx
from ddpadvisor.scan.interp.frames import (
    _EXPANDABLE,
    _RANK_NAMES,
    _WORLD_NAMES,
    DEFAULT_BUDGET,
    LAZY,
    ClassInfo,
    Frame,
    FuncRef,
    LazyImport,
    ModuleScope,
    WalkResult,
    _constant,
    _simple_expr,
)
from ddpadvisor.scan.source import Module, SourceSet
from ddpadvisor.scan.values import UNKNOWN, Obj, Val


class WalkerCore:
    def __init__(
        self,
        sources: SourceSet,
        budget: int = DEFAULT_BUDGET,
        flip: frozenset[tuple[str, int, str]] = frozenset(),
    ) -> None:
        self.sources = sources
        # An excerpt (code pasted into a post) uses names it never defines (rank, optimizer,
        # scaler, loader): each is given the role its name says, as an unpassed parameter is.
        self.excerpt = getattr(sources, "excerpt", False)
        # Conditional bindings with two readable values (file, line of the if, name), in the
        # order met, and the ones this walk reads the other way (see Statements._join).
        # Sites that bind another function, class or object come first.
        self.sites: list[tuple[str, int, str]] = []
        self.code_sites: set[tuple[str, int, str]] = set()
        # Sites whose other value is data from code the scan does not read.
        self.opaque_sites: set[tuple[str, int, str]] = set()
        self.flip = flip
        self.events: list[Event] = []
        self.objects: dict[int, Obj] = {}
        self.scopes: dict[str, ModuleScope] = {}
        self.seq = 0
        self.budget = budget
        self.initial_budget = budget
        self.truncated = False
        self.stack: list[ast.AST] = []
        self.inlined: dict[int, int] = {}
        self.cached_returns: dict[int, Val] = {}
        self.classes: list[ClassInfo] = []
        self.functions: list[FuncRef] = []
        self.warnings: list[str] = []
        self.rank_slices: list[str] = []  # data[rank::world_size]: a hand-made shard
        # Tests the script used to choose its distributed set-up (ast.dump of the expanded
        # test → whether it holds in the distributed job): see interp.branches.
        self.dist_tests: dict[str, bool] = {}
        self.loops: list[LoopCtx] = []  # every loop met, in walk order
        # Set by an if whose side that runs in the job returns, raises or continues: the
        # rest of the block is not read (Statements.walk_block).
        self.dead_after = False

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
        self._settle_lazy()
        return WalkResult(
            self.events,
            self.objects,
            self.sources,
            [*self.sources.warnings, *self.warnings],
            self.truncated,
            self.classes,
            self.functions,
            self.rank_slices,
            self.loops,
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

    @property
    def walked_statements(self) -> int:
        """How many statements the walk visited (what another reading of it costs)."""
        return self.initial_budget - self.budget

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
                return self.resolved(f.locals, name)
            f = f.parent
        if name in frame.scope.globals:
            return self.resolved(frame.scope.globals, name)
        if self.excerpt:
            if not name[:1].isupper():  # DataLoader, DDP: classes, not roles
                role = self.unbound(name)
                if role.kind is not None or role.taint - {V.UNBOUND}:
                    return role
            # defined outside the excerpt: still resolvable as a library name, never a value
            return Val(kind="symbol", canon=name, taint=frozenset({V.UNBOUND}))
        return Val(kind="symbol", canon=name)

    def resolved(self, names: dict[str, Val], name: str, depth: int = 0) -> Val:
        """``names[name]``, with a lazy import read now and put in its place."""
        val = names[name]
        if val.kind != LAZY or not isinstance(val.const, LazyImport):
            return val
        lazy = val.const
        names[name] = UNKNOWN  # an import that leads back to itself reads as unknown
        if lazy.name is None:
            module = self.sources.resolve(lazy.module)
            if module is None:
                out = Val(kind="symbol", canon=lazy.module)
            else:
                top = lazy.bound.split(".")[0] if lazy.module != lazy.bound else ""
                scope = self._module_scope(lazy.bound or lazy.module)
                if top and scope is not None:
                    out = Val(kind="module", const=self._scope(module))
                else:
                    out = (
                        Val(kind="module", const=scope)
                        if scope is not None
                        else Val(kind="symbol", canon=lazy.bound)
                    )
        else:
            scope = self._module_scope(lazy.module)
            if scope is not None and lazy.name in scope.globals and depth < 16:
                out = self.resolved(scope.globals, lazy.name, depth + 1)
            else:
                out = self.import_name(lazy.module, lazy.name, scope)
        names[name] = out
        return out

    def _settle_lazy(self) -> None:
        """After the walk, an import no code used stays unread: the rules, which read module
        globals directly, see the name it would bind as code the scan does not have."""
        for scope in self.scopes.values():
            for name, val in scope.globals.items():
                if val.kind == LAZY and isinstance(val.const, LazyImport):
                    lazy = val.const
                    canon = lazy.bound or lazy.module
                    if lazy.name is not None:
                        canon = f"{lazy.module}.{lazy.name}" if lazy.module else lazy.name
                    scope.globals[name] = Val(kind="symbol", canon=canon)

    def lookup_expr(self, name: str, frame: Frame) -> ast.expr | None:
        f: Frame | None = frame
        while f is not None:
            if name in f.locals:
                return f.exprs.get(name)
            f = f.parent
        return frame.scope.exprs.get(name)

    def bind_name(self, name: str, val: Val, frame: Frame, expr: ast.expr | None) -> None:
        if name in frame.global_names:
            # ``global _ready`` then ``_ready = True`` inside a set-up function: the module's
            # binding changes, and every later read of it (``def ready(): return _ready``)
            frame = Frame(frame.scope, frame.scope.globals, frame.scope.exprs)
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
            elif (
                isinstance(value, list)
                and value
                and isinstance(value[0], ast.expr)
                and len(value) <= 32  # a data table (class names, templates): not a condition
            ):
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

    def rebind(self, target: ast.expr, val: Val, frame: Frame) -> None:
        """In-place operations (``dist.all_reduce(t)``) change what a name holds."""
        if isinstance(target, ast.Name):
            frame.locals[target.id] = val
        elif isinstance(target, ast.Attribute):
            obj = self.obj(self.eval_pure(target.value, frame))
            if obj is not None:
                obj.attrs[target.attr] = val

    if TYPE_CHECKING:

        def walk_block(self, stmts: list[ast.stmt], frame: Frame, ctx: Ctx) -> None: ...

        def walk_stmt(self, stmt: ast.stmt, frame: Frame, ctx: Ctx) -> None: ...

        def walk_if(self, stmt: ast.If, frame: Frame, ctx: Ctx) -> None: ...

        def _test_taint(self, test: ast.expr, frame: Frame) -> frozenset[str]: ...

        def _loop_carried(self, loop: ast.For | ast.AsyncFor | ast.While, frame: Frame) -> None: ...

        def walk_for(self, stmt: ast.For | ast.AsyncFor, frame: Frame, ctx: Ctx) -> None: ...

        def element_of(self, it: Val, node: ast.AST | None) -> Val: ...

        def walk_with(self, stmt: ast.With | ast.AsyncWith, frame: Frame, ctx: Ctx) -> None: ...

        def assign(
            self,
            target: ast.expr,
            val: Val,
            value_node: ast.expr | None,
            frame: Frame,
            ctx: Ctx,
            stmt: ast.AST,
        ) -> None: ...

        def aug_assign(self, stmt: ast.AugAssign, frame: Frame, ctx: Ctx) -> None: ...

        def do_import(self, stmt: ast.Import, frame: Frame) -> None: ...

        def do_import_from(self, stmt: ast.ImportFrom, frame: Frame) -> None: ...

        def _module_scope(self, modname: str) -> ModuleScope | None: ...

        def import_name(self, modname: str, name: str, scope: ModuleScope | None) -> Val: ...

        def define_class(self, stmt: ast.ClassDef, frame: Frame, ctx: Ctx) -> None: ...

        def _field_default(self, value: ast.expr, frame: Frame, ctx: Ctx) -> Val: ...

        def instantiate(self, info: ClassInfo, ev: Event, frame: Frame, ctx: Ctx) -> Val: ...

        def inline(
            self,
            ref: FuncRef,
            args: list[Val],
            kwargs: dict[str, Val],
            self_val: Val | None,
            call_node: ast.Call | None,
            caller: Frame,
            ctx: Ctx,
        ) -> Val: ...

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
        ) -> None: ...

        def eval(self, node: ast.expr | None, frame: Frame, ctx: Ctx) -> Val: ...

        def _boolop(self, node: ast.BoolOp, vals: list[Val]) -> Val: ...

        def job_truth(self, test: ast.expr, frame: Frame) -> str | None: ...

        def comprehension(self, node: ast.AST, frame: Frame, ctx: Ctx) -> Val: ...

        def binop(
            self,
            op: ast.operator,
            left: Val,
            right: Val,
            right_node: ast.expr | None,
            left_node: ast.expr | None = None,
            at: str | None = None,
        ) -> Val: ...

        def subscript(self, node: ast.Subscript, frame: Frame, ctx: Ctx) -> Val: ...

        def _env(self, key: str, default: Val | None) -> Val: ...

        def attribute(self, base: Val, name: str, frame: Frame) -> Val: ...

        def _arg_default(self, parser_ns: Obj, name: str) -> Val: ...

        def eval_call(self, node: ast.Call, frame: Frame, ctx: Ctx) -> Val: ...

        def call_semantics(self, ev: Event, fval: Val, frame: Frame, ctx: Ctx) -> Val: ...

        def forward(self, model: Val, ev: Event) -> Val: ...

        def criterion_call(self, crit: Val, ev: Event) -> Val: ...

        def method_call(self, ev: Event, recv: Val, method: str, frame: Frame, ctx: Ctx) -> Val: ...
