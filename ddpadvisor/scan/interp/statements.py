"""Statements and control flow: blocks, if/for/while/with, assignments, imports, classes,
inlined calls."""

from __future__ import annotations

import ast
from dataclasses import replace

from ddpadvisor.scan import apis, library
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import CondCtx, Ctx, Event, FuncCtx, LoopCtx, WithCtx
from ddpadvisor.scan.interp import branches
from ddpadvisor.scan.interp.core import WalkerCore
from ddpadvisor.scan.interp.frames import (
    _AUG_OPS,
    _CTX_KINDS,
    _MAIN_PROCESS_NAMES,
    _RANK_NAMES,
    LAZY,
    MAX_DEPTH,
    MAX_INLINES_PER_FUNCTION,
    ClassInfo,
    Frame,
    FuncRef,
    LazyImport,
    ModuleScope,
    _always_exits,
    _is_main_guard,
    _simple_expr,
    makes_context,
    reading,
    union,
)
from ddpadvisor.scan.values import NO_CONST, UNKNOWN, Obj, Val, merge


class Statements(WalkerCore):
    # ------------------------------------------------------------------ statements
    def walk_block(self, stmts: list[ast.stmt], frame: Frame, ctx: Ctx) -> None:
        extra: list[CondCtx] = []
        for stmt in stmts:
            if self.budget <= 0:
                self.truncated = True
                return
            self.budget -= 1
            cur = ctx + tuple(extra) if extra else ctx
            try:
                self.walk_stmt(stmt, frame, cur)
                if _is_config_exec(stmt):
                    self._config_overrides(frame)
                if self.dead_after:
                    self.dead_after = False
                    return
            except RecursionError:
                # An expression nested deeper than Python's stack (``1 + 1 + … + 1`` a
                # thousand times): that statement is skipped, the rest is still read.
                self.warnings.append(
                    f"{frame.scope.module.label}:{stmt.lineno}: expression too deep to read; "
                    "statement skipped"
                )
            if (
                isinstance(stmt, ast.If)
                and not stmt.orelse
                and _always_exits(stmt.body, stmt.test)
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
                        job=self.job_truth(stmt.test, frame),
                    )
                )

    def _config_overrides(self, frame: Frame) -> None:
        """After ``exec(open("configurator.py").read())`` (nanoGPT) a config file or the
        command line may rebind any simple global: their values so far are only defaults."""
        for name, val in list(frame.locals.items()):
            if val.known and isinstance(val.const, (bool, int, float, str)):
                frame.locals[name] = replace(val, taint=val.taint | {V.ARGDEFAULT})

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
            loop = LoopCtx(
                stmt, label, stmt.lineno, UNKNOWN, is_while=True, outer=ctx, seq=self.seq
            )
            self.loops.append(loop)
            self.walk_block(stmt.body, frame, (*ctx, loop))
            self.walk_block(stmt.orelse, frame, ctx)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.walk_with(stmt, frame, ctx)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.walk_try(stmt, frame, ctx)
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

    def walk_try(self, stmt: ast.stmt, frame: Frame, ctx: Ctx) -> None:
        """The body is the reading that holds after a ``try``: it is the path the code was
        written for (``world_size = int(os.environ["WORLD_SIZE"])`` with a fallback of 1, an
        optional import with a ``None`` stand-in). Each handler is read from the state before
        the ``try``; its bindings hold afterwards only when the body cannot fall through."""
        body: list[ast.stmt] = stmt.body  # type: ignore[attr-defined]
        before, before_exprs = dict(frame.locals), dict(frame.exprs)
        self.walk_block(body, frame, ctx)
        self.walk_block(stmt.orelse, frame, ctx)  # type: ignore[attr-defined]
        after, after_exprs = dict(frame.locals), dict(frame.exprs)
        handlers = stmt.handlers  # type: ignore[attr-defined]
        for handler in handlers:
            _restore(frame, before, before_exprs)
            self.walk_block(handler.body, frame, ctx)
        if handlers and not _ends_branch(body):
            _restore(frame, after, after_exprs)
        self.walk_block(stmt.finalbody, frame, ctx)  # type: ignore[attr-defined]

    def walk_if(self, stmt: ast.If, frame: Frame, ctx: Ctx) -> None:
        if _is_main_guard(stmt.test):
            # true in the script that was launched; in a module it imports (a sampling
            # script's ``main`` beside the helper the training script takes from it), false
            main = frame.scope.module is self.sources.main
            self.walk_block(stmt.body if main else stmt.orelse, frame, ctx)
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
        job = self.job_truth(stmt.test, frame)
        if job in (branches.ALL, branches.NONE):
            # The test decides which side runs in the multi-rank job (``if world_size > 1:``,
            # ``if not args.distributed:``): the other side is the single-process path, dead
            # code for the job being diagnosed, and only this side's bindings hold after it.
            # A command-line default does not decide it (``--distributed`` defaults to off;
            # the job being diagnosed turned it on). The side read still carries its CondCtx.
            runs_body = job == branches.ALL
            taken = CondCtx(stmt, label, stmt.lineno, expanded, runs_body, taint, None, job)
            side = stmt.body if runs_body else stmt.orelse
            self.walk_block(side, frame, (*ctx, taken))
            if _ends_branch(side):
                self.dead_after = True  # the rest of the block never runs in the job
            return
        body = CondCtx(stmt, label, stmt.lineno, expanded, True, taint, const, job)
        before, before_exprs = dict(frame.locals), dict(frame.exprs)
        # A method's own attributes (``self.ctx = autocast(...)`` / ``self.ctx = Null()``)
        # are bindings of the if as much as its locals: each side starts from what held
        # before, and both are joined after it.
        owner = self.obj(frame.self_val) if frame.self_val is not None else None
        attrs_before = dict(owner.attrs) if owner is not None else {}
        first = len(self.events)
        self.walk_block(stmt.body, frame, (*ctx, body))
        body_ends = _ends_branch(stmt.body)
        body_dist = _sets_up_distributed(self.events[first:])
        after_body, body_exprs = dict(frame.locals), dict(frame.exprs)
        attrs_body = dict(owner.attrs) if owner is not None else {}
        if job is None and self.job_truth(stmt.test, frame) == branches.ALL:
            # The body chose the distributed set-up with this very test (``if n_gpus > 1:
            # mp.spawn(train)`` where ``train`` starts with ``if n_gpus > 1:
            # init_process_group(...)``): now that it is known to hold in the job, the else
            # side is the single-process path, dead code as for ``if world_size > 1:``.
            if body_ends:
                self.dead_after = True
            return
        # Without an else, the path that skips the body keeps what held before the if.
        after_else, else_ends, else_dist = before, False, False
        if stmt.orelse:
            # The else branch starts from what held before the if, not from the body's end.
            _restore(frame, before, before_exprs)
            _set_attrs(owner, attrs_before)
            orelse = CondCtx(stmt, label, stmt.lineno, expanded, False, taint, const, job)
            mid = len(self.events)
            self.walk_block(stmt.orelse, frame, (*ctx, orelse))
            after_else, else_ends = dict(frame.locals), _ends_branch(stmt.orelse)
            else_dist = _sets_up_distributed(self.events[mid:])
        attrs_else = dict(owner.attrs) if owner is not None and stmt.orelse else attrs_before
        if body_ends or else_ends:
            # Only one way (or none) reaches the code after the if: its bindings hold.
            if body_ends and not else_ends and not stmt.orelse:
                _restore(frame, before, before_exprs)
                _set_attrs(owner, attrs_before)
            elif else_ends and not body_ends:
                _restore(frame, after_body, body_exprs)
                _set_attrs(owner, attrs_body)
            return  # (after an else branch that holds, the frame is already its end)
        rank_switch = bool(taint & {V.RANK, V.WORLD}) or job == branches.SOME
        # The job being diagnosed runs distributed: a switch between a distributed set-up
        # (init_process_group, a DDP/FSDP wrap) and a single-process one is read on its
        # distributed side, with no second reading; and the same test met again later
        # (``if args.distributed: sampler.set_epoch(epoch)``) means the same.
        dist_side = body_dist if body_dist != else_dist else None
        if (
            dist_side is not None
            and job is None
            and not taint & {V.RANK}
            and not any(isinstance(n, ast.Call) for n in ast.walk(stmt.test))
        ):
            # (not a check of state such as ``if not dist.is_initialized():``, which holds
            # before the set-up and not after it)
            self.dist_tests.setdefault(branches.learned_key(stmt.test, expanded), dist_side)
        for name in dict.fromkeys([*after_body, *after_else]):
            yes, no = after_body.get(name), after_else.get(name)
            if yes is None or no is None or yes is no:
                if name not in frame.locals and yes is not None:
                    # Bound in the body only (the else branch is what the frame holds now).
                    frame.locals[name] = yes
                    if name in body_exprs:
                        frame.exprs[name] = body_exprs[name]
                continue
            if dist_side is None:
                val = self._join(
                    stmt, label, name, yes, no, bool(stmt.orelse), rank_switch, expanded
                )
                if job == branches.SOME and _is_data(yes) and _is_data(no):
                    # bound one way on some ranks and another way on the others: the value
                    # depends on the rank (``ckpt = last if is_main_process() else None``)
                    val = val.with_taint(V.RANK)
            elif not stmt.orelse:
                val = yes
            else:
                val = union([yes, no] if dist_side else [no, yes])
            frame.locals[name] = val
            frame.exprs.pop(name, None)
        if owner is None:
            return
        for attr in dict.fromkeys([*attrs_body, *attrs_else]):
            yes, no = attrs_body.get(attr), attrs_else.get(attr)
            if yes is None or no is None or yes is no:
                owner.attrs[attr] = yes if yes is not None else no  # type: ignore[assignment]
                continue
            if dist_side is None:
                name = f"self.{attr}"
                val = self._join(
                    stmt, label, name, yes, no, bool(stmt.orelse), rank_switch, expanded
                )
            elif not stmt.orelse:
                val = yes
            else:
                val = union([yes, no] if dist_side else [no, yes])
            owner.attrs[attr] = val

    def _join(
        self,
        stmt: ast.If,
        label: str,
        name: str,
        yes: Val,
        no: Val,
        has_else: bool,
        rank_switch: bool,
        test: ast.expr | None = None,
    ) -> Val:
        """What ``name`` holds after an undecided ``if`` that binds it on one or both sides.

        The walk follows one reading: the body's value (for ``if``/``else``, the union of
        both, body first), as the code after the ``if`` is usually written for it. Two rules
        keep that reading honest:

        - where the other side is code the scan reads (a local function, class or method),
          an alternative it cannot read (a name imported from code it does not have, e.g.
          ``get_dataloaders = mocked_dataloaders`` under a test-only switch, or the unknown
          result of a call) adds no reading: it could do anything, so it neither confirms
          nor contradicts what the readable definition decides, and that one is followed.
          For data this does not hold: ``accum = 1`` with ``accum = CONFIG_ACCUM`` from an
          unread module under a switch is not known to be 1 (either way round), so a fact
          the unread side leaves undecided is left undecided;
        - two readable alternatives that differ (another function, object or constant) make
          the binding a *site*: :func:`ddpadvisor.scan.scan_file` walks the script again with
          the other one, and a fact the two walks decide differently is left undecided. Tests
          on the rank or world size are not sites: both sides run in the same job, on
          different ranks, and the rules read those branches themselves.
        """
        if (
            has_else
            and not rank_switch
            and test is not None
            and makes_context(yes)
            and makes_context(no)
            and reading(yes) != reading(no)
        ):
            # ``context = model.no_sync`` on some micro-steps, ``nullcontext`` on the others:
            # one context chosen by the test each time it runs, as ``a if test else b``
            # would, not two readings of the whole script
            return Val(kind=V.ALTERNATIVES, items=(yes, no), node=test)
        if _opaque(yes) and no.kind in _CODE_KINDS:
            return no
        if _opaque(no) and yes.kind in _CODE_KINDS:
            return yes
        primary = union([yes, no]) if has_else else yes
        if rank_switch or _same_reading(yes, no):
            return primary
        site = (label, stmt.lineno, name)
        if _opaque(no):
            self.opaque_sites.add(site)
        if site not in self.sites:
            # Another function, class or object changes which code runs: those sites come
            # first (after the ones met before), constants after them.
            if any(v.ref is not None or v.kind in _CODE_KINDS for v in (yes, no)):
                self.sites.insert(len(self.code_sites), site)
                self.code_sites.add(site)
            else:
                self.sites.append(site)
        if site in self.flip:
            return no.with_taint(V.PICKED) if no.kind in _PICKABLE else no
        # code one side picks (a function, a class): what it does is one reading of two
        return primary.with_taint(V.PICKED) if primary.kind in _PICKABLE else primary

    def job_truth(self, test: ast.expr, frame: Frame) -> str | None:
        """What ``test`` means in the multi-rank job (see :mod:`interp.branches`)."""
        return branches.Classifier(
            lambda node: self.eval_pure(node, frame),
            self.dist_tests,
            lambda node: self.expand(node, frame),
            lambda: _sets_up_distributed(self.events),
        ).truth(test)

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
        it, own = self._iter_protocol(it, stmt, frame, ctx)
        elem = own if own is not None else self.element_of(it, stmt.iter)
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
        count_node = None
        call = stmt.iter
        if (
            isinstance(call, ast.Call)
            and getattr(call.func, "id", "") == "enumerate"
            and call.args
            and isinstance(call.args[0], ast.Call)
        ):
            call = call.args[0]
        if (
            isinstance(call, ast.Call)
            and getattr(call.func, "id", "") == "range"
            and 1 <= len(call.args) <= 2
        ):
            count_node = self.expand(call.args[-1], frame)
        elif (
            count is None
            and isinstance(call, ast.Call)
            and apis.last(ast.unparse(call.func)) == "islice"
            and len(call.args) == 2
            and isinstance(call.args[1], (ast.Name, ast.Constant))
        ):
            # ``for i, b in enumerate(islice(batches, accum))``: at most ``accum`` items, the
            # micro-batches of one window taken from an iterator begun outside the loop
            count = self.eval(call.args[1], frame, ctx)
            count_node = self.expand(call.args[1], frame)
        loop = LoopCtx(
            stmt,
            label,
            stmt.lineno,
            it,
            count,
            index_var,
            over_loader,
            count_node=count_node,
            loaders=frozenset(_iterated_loaders(it, elem)),
            starts=frozenset(_started_loaders(it)),
            outer=ctx,
            seq=self.seq,
        )
        self.loops.append(loop)
        self.walk_block(stmt.body, frame, (*ctx, loop))
        self.walk_block(stmt.orelse, frame, ctx)

    def _iter_protocol(
        self, it: Val, stmt: ast.For | ast.AsyncFor, frame: Frame, ctx: Ctx
    ) -> tuple[Val, Val | None]:
        """``for b in wrapper`` over an object of a local class: what its ``__iter__`` gives
        (a generator method, or ``self`` with a ``__next__``). Returns the iterable and, when
        ``__next__`` makes the items, the item."""
        obj = self.obj(it) if it.ref is not None else None
        info = obj.extra.get("class") if obj is not None else None
        if not isinstance(info, ClassInfo) or it.kind in (V.LOADER, V.DATASET):
            return it, None
        found = info.find_method("__iter__")
        if found is None:
            return it, None
        owner, fn = found
        got = self.inline(FuncRef(fn, owner.scope, None, owner=owner), [], {}, it, None, frame, ctx)
        if got.kind == "generator" or got.kind == V.LOADER:
            return got, None
        nxt = info.find_method("__next__")
        if got.ref == it.ref and nxt is not None:
            ref = FuncRef(nxt[1], nxt[0].scope, None, owner=nxt[0])
            return it, self.inline(ref, [], {}, it, None, frame, ctx)
        return it, None

    def element_of(self, it: Val, node: ast.AST | None) -> Val:
        if it.kind == V.LOADER:
            mark = {f"{BATCH_OF}{it.ref}"} if it.ref is not None else set()
            return Val(kind="batch", ref=it.ref, taint=it.taint | {V.DATA} | mark)
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
                    if kind == V.CTX_AUTOCAST and yes.const != no.const:
                        # two autocasts that differ (fp16 or bf16, on or off): not decided
                        val = Val(kind=V.CTX_AUTOCAST, const=("unknown", "maybe"))
                elif V.CTX_AUTOCAST in (yes.kind, no.kind):
                    # ``nullcontext() if device_type == "cpu" else autocast(...)``: autocast
                    # only on one side of an undecided test, so maybe on.
                    cast = yes if yes.kind == V.CTX_AUTOCAST else no
                    dtype = cast.const[0] if isinstance(cast.const, tuple) else "unknown"
                    kind = V.CTX_AUTOCAST
                    val = Val(kind=V.CTX_AUTOCAST, const=(dtype, "maybe"))
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
                obj.attrs[target.attr] = self._store_under(obj, target.attr, val, ctx)
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
            if isinstance(target.value, ast.Name) and base.mapping is not None and not key.known:
                # a dict filled under keys the scan cannot name (``out[name] = reduce(v)`` in
                # a loop over another dict): what went in is kept, as an entry "[?]". Entries
                # under named keys are not added (the dict may be filled elsewhere too, so a
                # DataLoader's ``**kwargs`` stays open)
                grown = (*base.mapping, ("[?]", val))[-64:]
                self.rebind(
                    target.value,
                    replace(base, mapping=grown, taint=base.taint | val.taint),
                    frame,
                )
        elif isinstance(target, ast.Starred):
            self.assign(target.value, val.plain(), None, frame, ctx, stmt)

    def _store_under(self, obj: Obj, attr: str, val: Val, ctx: Ctx) -> Val:
        """What an object's attribute holds after ``obj.attr = val`` in ``ctx``. Under an
        ``if`` the scan cannot decide (a hardware check, a config value) that the object was
        made outside of, the store may not run: a constant is then no longer known (the
        attribute holds it or what it held before). Tests that every rank of the job takes
        alike, or that pick ranks, do not count."""
        if not val.known:
            return val
        undecided = [
            c
            for c in ctx
            if isinstance(c, CondCtx)
            and c.const is None
            and c.job is None
            and V.RANK not in c.taint
            and V.WORLD not in c.taint
        ]
        if not undecided:
            return val
        made = next((e for e in reversed(self.events) if e.seq <= obj.seq), None)
        around = set(map(id, made.ctx)) if made is not None and made.seq == obj.seq else set()
        if all(id(c) in around for c in undecided):
            return val  # made on the same side of the same tests: the store runs with it
        before = obj.attrs.get(attr)
        if before is not None and before.known and before.const == val.const:
            return val
        return Val(taint=val.taint | (before.taint if before is not None else frozenset()))

    def aug_assign(self, stmt: ast.AugAssign, frame: Frame, ctx: Ctx) -> None:
        cur = (
            self.eval(stmt.target, frame, ctx)
            if not isinstance(stmt.target, ast.Subscript)
            else UNKNOWN
        )
        rhs = self.eval(stmt.value, frame, ctx)
        result = self.binop(stmt.op, cur, rhs, stmt.value, at=self._at(stmt, frame))
        if (
            isinstance(stmt.op, (ast.Add, ast.Sub))
            and V.WORLD in rhs.taint
            and V.WORLD not in cur.taint
            and any(isinstance(c, LoopCtx) for c in ctx)
        ):
            # ``consumed += world_size`` in a loop: a position that strides over the ranks'
            # examples (a count of what all of them read), not a value scaled by the world size
            result = replace(result, taint=result.taint - {V.WORLD})
        op = _AUG_OPS.get(type(stmt.op), "other")
        if isinstance(stmt.target, ast.Name):
            names = frame.scope.globals if stmt.target.id in frame.global_names else frame.locals
            names[stmt.target.id] = result
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
    # The script's own imports are read as they run: each module they name is walked then.
    # A module-level import inside an imported module binds its names lazily (a LazyImport):
    # the module it names is read when one of them is first used, so a package costs the
    # files its training path touches, not every file its ``__init__`` imports.

    def _lazy(self, frame: Frame) -> bool:
        return frame.name == "<module>" and frame.scope.module is not self.sources.main

    def do_import(self, stmt: ast.Import, frame: Frame) -> None:
        lazy = self._lazy(frame)
        for alias in stmt.names:
            top = alias.name.split(".")[0]
            if lazy:
                target = alias.name if alias.asname else top
                frame.locals[alias.asname or top] = Val(
                    kind=LAZY, const=LazyImport(target, None, alias.name)
                )
                continue
            sibling = self.sources.resolve(alias.name)
            if sibling is not None:
                top_mod = self.sources.resolve(top)
                for mod in (top_mod, sibling):  # Python runs the package's __init__ first
                    if mod is not None:
                        self._walk_module(self._scope(mod))
                if alias.asname:
                    frame.locals[alias.asname] = Val(kind="module", const=self._scope(sibling))
                else:
                    frame.locals[top] = (
                        Val(kind="module", const=self._scope(top_mod))
                        if top_mod is not None
                        else Val(kind="symbol", canon=top)
                    )
                continue
            if alias.asname:
                frame.locals[alias.asname] = Val(kind="symbol", canon=alias.name)
            else:
                frame.locals[top] = Val(kind="symbol", canon=top)

    def do_import_from(self, stmt: ast.ImportFrom, frame: Frame) -> None:
        modname = stmt.module or ""
        if stmt.level:
            # Relative to the importing module's package (the script's own package when it
            # sits in one; a script outside any package: its folder).
            package = frame.scope.module.package
            base = package.split(".") if package else []
            up = stmt.level - 1
            base = base[: len(base) - up] if up <= len(base) else []
            modname = ".".join([*base, modname] if modname else base)
        if self._lazy(frame):
            for alias in stmt.names:
                if alias.name == "*":
                    self._import_star(modname, frame)
                    continue
                frame.locals[alias.asname or alias.name] = Val(
                    kind=LAZY, const=LazyImport(modname, alias.name)
                )
            return
        scope = self._module_scope(modname)
        for alias in stmt.names:
            local = alias.asname or alias.name
            if alias.name == "*":
                self._import_star(modname, frame)
                continue
            frame.locals[local] = self.import_name(modname, alias.name, scope)

    def _module_scope(self, modname: str) -> ModuleScope | None:
        """The walked scope of a project module (its packages' ``__init__`` walked first)."""
        module = self.sources.resolve(modname) if modname else None
        if module is None:
            return None
        parts = modname.split(".")
        for i in range(1, len(parts)):
            parent = self.sources.resolve(".".join(parts[:i]))
            if parent is not None:
                self._walk_module(self._scope(parent))
        scope = self._scope(module)
        self._walk_module(scope)
        return scope

    def import_name(self, modname: str, name: str, scope: ModuleScope | None) -> Val:
        """What ``from modname import name`` binds: the module's global (a lazy one resolved),
        else its sub-module, else the library's symbol."""
        if name == "TYPE_CHECKING" and modname in ("typing", "typing_extensions"):
            return Val(const=False)  # False when the code runs: its imports are for checkers
        if scope is not None and name in scope.globals:
            return self.resolved(scope.globals, name)
        sub = self.sources.resolve(f"{modname}.{name}" if modname else name)
        if sub is not None:
            sub_scope = self._scope(sub)
            self._walk_module(sub_scope)
            return Val(kind="module", const=sub_scope)
        return Val(kind="symbol", canon=f"{modname}.{name}" if modname else name)

    def _import_star(self, modname: str, frame: Frame) -> None:
        scope = self._module_scope(modname)
        if scope is None:
            return
        for k in list(scope.globals):
            if not k.startswith("_"):
                frame.locals[k] = self.resolved(scope.globals, k)

    # ------------------------------------------------------------------ classes
    def define_class(self, stmt: ast.ClassDef, frame: Frame, ctx: Ctx) -> None:
        # ``class S(Sampler[int])``, ``class D(Dataset[dict])``: a generic base parameterised
        # for type checkers is the class itself at run time.
        bases = [
            self.eval(b.value if isinstance(b, ast.Subscript) else b, frame, ctx)
            for b in stmt.bases
        ]
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
        obj = self.new_obj(
            kind,
            ev.node,
            frame,
            canon=f"local:{info.name}",
            kwargs=dict(ev.kwargs),
            args=list(ev.args),
        )
        obj.extra["class"] = info
        inst = Val(kind=kind, ref=obj.ref, canon=f"local:{info.name}")
        if info.is_dataclass:
            names = [f for cls in reversed(info.mro()) for f in cls.fields]
            # ``Config(**loaded)`` / ``Config(*values)``: a field default is only a fallback
            # that the loaded config may override, like a command-line default.
            node = ev.node
            opaque = isinstance(node, ast.Call) and (
                any(k.arg is None for k in node.keywords)
                or any(isinstance(a, ast.Starred) for a in node.args)
            )
            for name in names:
                default = info.find_attr(name)
                if default is not None:
                    if opaque:
                        default = replace(default, taint=default.taint | {V.ARGDEFAULT})
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
        self._open_attributes(ref, args, kwargs, self_val)
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
        frame.global_names = _declared_global(fn)
        if ref.owner is not None and self_val is not None:
            frame.owner, frame.self_val = ref.owner, self_val
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
        entered = _yielded_context(frame, fn)
        if entered is not None:
            # ``@contextmanager def amp(**kw): with torch.amp.autocast(**kw): yield``: the
            # caller's ``with amp(...):`` enters the context held open around the yield
            result = entered
        elif frame.yields:
            result = Val(kind="generator", items=(union(frame.yields),))
        else:
            result = union(frame.returns) if frame.returns else UNKNOWN
            chosen = _chosen_context(frame.returns, fn)
            if chosen is not None:
                result = chosen
        self.cached_returns[key] = result
        return result

    def _open_attributes(
        self, ref: FuncRef, args: list[Val], kwargs: dict[str, Val], self_val: Val | None
    ) -> None:
        """``def update_config(config, **kwargs): ... setattr(config, k, v)``: a function that
        sets attributes named at run time on an object it is handed (the run's options copied
        onto a config) leaves that object's attributes as defaults the run may override. Read
        before the call is inlined, since such helpers often recurse into tuples of configs."""
        fn = ref.node
        if isinstance(fn, ast.Lambda):
            return
        params = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
        if self_val is not None and params:
            params = params[1:]
        targets = {
            sub.args[0].id
            for sub in ast.walk(fn)
            if isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Name)
            and sub.func.id == "setattr"
            and len(sub.args) >= 2
            and isinstance(sub.args[0], ast.Name)
            and not isinstance(sub.args[1], ast.Constant)
        }
        for name in targets:
            if name not in params:
                continue
            i = params.index(name)
            val = args[i] if i < len(args) else kwargs.get(name)
            if val is None:
                continue
            for v in (val, *(val.items or ())):
                obj = self.obj(v)
                if obj is not None:
                    obj.extra["open_attrs"] = True

    def _annotated_instance(self, annotation: ast.expr, frame: Frame, val: Val) -> Val:
        """``def main(exp: Exp, args)`` handed an object the scan could not build (an
        experiment class loaded by name through importlib): the project's class the
        annotation names stands for it, so its methods (``exp.get_trainer(args)``) are read.
        Its ``__init__`` is not run (its arguments are not known); attributes read from it
        stay unknown. A subclass the run loads may override a method: a reading, not a fact
        the annotation proves, as for any object the scan builds. Only plain classes: a
        dataclass of options is filled from the command line, and its defaults are not the
        run's values."""
        cls = self.eval_pure(annotation, frame)
        if cls.kind != "class" or not isinstance(cls.const, ClassInfo):
            return val
        info = cls.const
        kind = info.object_kind()
        if kind != V.INSTANCE or any(c.is_dataclass for c in info.mro()):
            # a dataclass of options (filled from the command line) or a model, dataset or
            # trainer: its class defaults are not the run's values, and the object itself
            # is what the run built, so only a plain class of the project's code stands in
            return val
        obj = self.new_obj(kind, annotation, frame, canon=f"local:{info.name}")
        obj.extra["class"] = info
        return Val(kind=kind, ref=obj.ref, canon=f"local:{info.name}", taint=val.taint)

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
            if p.annotation is not None and _opaque_arg(val):
                val = self._annotated_instance(p.annotation, frame, val)
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


BATCH_OF = "batchof:"  # taint: derived from a batch of the DataLoader with this ref


def batch_refs(val: Val, depth: int = 0) -> set[int]:
    """The DataLoaders whose batches ``val`` (or a part of it) derives from."""
    out = {
        int(t[len(BATCH_OF) :])
        for t in val.taint
        if t.startswith(BATCH_OF) and t[len(BATCH_OF) :].isdigit()
    }
    if val.items and depth < 4:
        for item in val.items:
            out |= batch_refs(item, depth + 1)
    return out


def _iterated_loaders(it: Val, elem: Val) -> set[int]:
    """The DataLoaders whose batches a loop over ``it`` walks: its items carry their batches
    and ``it`` is not itself cut from a batch (``for mb in batch.chunk(k)`` walks pieces of
    one batch, not the loader)."""
    if it.kind in ("zip", "enumerate") and it.items:
        parts = it.items if it.kind == "zip" else it.items[:1]
        out: set[int] = set()
        for part in parts:
            if part.kind == V.LOADER and part.ref is not None:
                out.add(part.ref)
            elif not any(t.startswith(BATCH_OF) for t in part.taint):
                sub = part.items[0] if part.kind in ("generator", "sized") and part.items else None
                if sub is not None:
                    out |= batch_refs(sub)
        return out
    if it.kind == V.LOADER and it.ref is not None:
        return {it.ref}
    if any(t.startswith(BATCH_OF) for t in it.taint):
        return set()
    return batch_refs(elem)


def _started_loaders(it: Val) -> set[int]:
    """The DataLoaders a loop over ``it`` starts iterating itself."""
    if it.kind == V.LOADER and it.ref is not None:
        return {it.ref}
    if it.kind in ("zip", "enumerate") and it.items:
        parts = it.items if it.kind == "zip" else it.items[:1]
        return {p.ref for p in parts if p.kind == V.LOADER and p.ref is not None}
    return set()


def _opaque_arg(val: Val) -> bool:
    """A value the scan knows nothing about: no kind, no object, no constant, no parts."""
    return (
        val.kind is None
        and val.ref is None
        and not val.known
        and val.items is None
        and val.mapping is None
    )


_CODE_KINDS = (V.FUNCTION, V.LAMBDA, "class", "method")
_PICKABLE = (*_CODE_KINDS, V.PARTIAL)
_DIST_KINDS = (V.DDP, V.FSDP)


def _is_data(val: Val) -> bool:
    """A plain value (a constant, a path, a number), not an object or code."""
    return val.ref is None and val.kind in (None, "symbol") and not isinstance(val.const, FuncRef)


def _sets_up_distributed(events: list[Event]) -> bool:
    """Whether these calls make the job distributed: a process group, a DDP/FSDP wrapper.
    (A DistributedSampler alone is not: a job already distributed may shard or not.)"""
    for e in events:
        if e.kind != "call":
            continue
        if e.result is not None and e.result.kind in _DIST_KINDS:
            return True
        if apis.last(e.name) == "init_process_group":
            return True
    return False


def _declared_global(fn: ast.AST) -> frozenset[str]:
    """Names a function's ``global`` statements make module globals (not those of functions
    defined inside it, which have their own scope)."""
    names: set[str] = set()
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Global):
            names.update(node.names)
        elif not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        ):
            stack.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def _set_attrs(owner: Obj | None, attrs: dict[str, Val]) -> None:
    if owner is not None:
        owner.attrs.clear()
        owner.attrs.update(attrs)


def _ends_branch(stmts: list[ast.stmt]) -> bool:
    """A branch whose bindings never reach the code after its ``if`` (it returns, raises or
    continues on every path the scan reads). ``break`` is not one: what it binds reaches the
    code after the loop."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise, ast.Continue)):
        return True
    if isinstance(last, ast.If) and last.orelse:
        return _ends_branch(last.body) and _ends_branch(last.orelse)
    return False


def _restore(frame: Frame, names: dict[str, Val], exprs: dict[str, ast.expr]) -> None:
    """Put a frame's bindings back in place (the module frame shares its dict with the scope)."""
    frame.locals.clear()
    frame.locals.update(names)
    frame.exprs.clear()
    frame.exprs.update(exprs)


def _opaque(val: Val) -> bool:
    """A name the scan has no code or library entry for, or the unknown result of a call:
    calling it could do anything."""
    if val.kind is None:
        return not val.known and val.ref is None and val.items is None and val.mapping is None
    if val.kind != "symbol" or not val.canon:
        return False
    return not library.table.lookup(val.canon, apis.last(val.canon))


def _same_reading(a: Val, b: Val) -> bool:
    """The same object, function or constant (taint aside): no second reading to check."""
    if a.kind != b.kind or a.ref != b.ref or a.canon != b.canon:
        return False
    if a.known or b.known:
        return a.known and b.known and a.const == b.const
    return a.const is b.const and a.items == b.items


def _is_config_exec(stmt: ast.stmt) -> bool:
    """``exec(<code read at run time>)`` as a statement: it may rebind the module's globals."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    return (
        isinstance(call.func, ast.Name)
        and call.func.id == "exec"
        and bool(call.args)
        and not isinstance(call.args[0], ast.Constant)
    )


def _yielded_context(frame: Frame, fn: ast.AST) -> Val | None:
    """What ``with helper():`` enters when ``helper`` is a ``@contextmanager`` generator that
    yields only inside contexts of a known kind: that context, or the two that differ as
    alternatives (one per path to a ``yield``). A helper that yields outside any such context
    on some path (``if sync: yield else: with m.no_sync(): yield``) is left as it was."""
    if not frame.yield_contexts or not _is_context_manager(fn):
        return None
    held = frame.yield_contexts
    if any(v is None for v in held):
        return None
    distinct: list[Val] = []
    for v in held:
        if v is not None and all(reading(v) != reading(d) for d in distinct):
            distinct.append(v)
    if len(distinct) == 1:
        return distinct[0]
    test = ast.Name(id=f"<{getattr(fn, 'name', 'helper')} path>", ctx=ast.Load())
    return Val(kind=V.ALTERNATIVES, items=(distinct[0], distinct[1]), node=test)


def _is_context_manager(fn: ast.AST) -> bool:
    """A generator function decorated with ``contextlib.contextmanager`` (or its async form)."""
    for d in getattr(fn, "decorator_list", []):
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("contextmanager", "asynccontextmanager"):
            return True
    return False


def _chosen_context(returns: list[Val], fn: ast.AST) -> Val | None:
    """A function whose returns are different context managers (or callables making them),
    on paths its arguments choose: the caller gets one of them, not the first path's. The
    result is an alternative (kind ``ifexp``) of the first and the second distinct one; the
    ``with`` that uses it reads an autocast on one side only as "maybe on"."""
    makers = [v for v in returns if makes_context(v)]
    if not makers:
        return None
    distinct: list[Val] = []
    for v in returns:
        if all(reading(v) != reading(d) for d in distinct):
            distinct.append(v)
    if len(distinct) < 2:
        return None
    test = ast.Name(id=f"<{getattr(fn, 'name', 'helper')} argument>", ctx=ast.Load())
    return Val(kind=V.ALTERNATIVES, items=(distinct[0], distinct[1]), node=test)
