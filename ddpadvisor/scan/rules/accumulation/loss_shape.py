from __future__ import annotations

import ast
from collections.abc import Callable

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import FuncCtx
from ddpadvisor.scan.interp.frames import FuncRef
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, not_in_excerpt, rule
from ddpadvisor.scan.source import Module
from ddpadvisor.scan.values import Val


def _token_signals(rc: RuleContext, dropped: list[str] | None = None) -> list[str]:
    """Padding, label masking or token-count plumbing anywhere in the scanned files, outside
    functions that run without gradients (``@torch.no_grad() def evaluation(...)``: how an
    evaluation pads its texts says nothing about the training batches). ``dropped`` collects
    the signals left out for that reason."""
    found: list[tuple[str, int]] = []
    no_grad = rc.a.no_grad_functions
    modules = [rc.walk.sources.main, *rc.walk.sources.modules.values()]
    ignore_names = {name for m in modules for name in _named_ignore_constants(m)}
    ran_funcs = {(c.file, c.line) for e in rc.a.events for c in e.ctx if isinstance(c, FuncCtx)}
    for m in modules:
        idx = m.index
        out: list[tuple[str, int]] = []
        for kw in idx.keywords:
            value = kw.value
            const = value.value if isinstance(value, ast.Constant) else None
            # ``ignore_index=`` alone is no sign of padding (nanoGPT passes -1 on fixed-size
            # blocks): masking shows where labels are set to the ignored value (``neg100``).
            if (
                kw.arg == "num_items_in_batch"
                or (kw.arg == "padding" and (const is True or const in ("longest", "max_length")))
                or (kw.arg == "packing" and const is True)
            ):
                out.append((m.label, value.lineno))
        for call, name, _ in idx.calls:
            if apis.last(name) in apis.PADDING_SIGNALS - {"pad"}:
                out.append((m.label, call.lineno))
        discarded = _discarded_call_args(m)
        out.extend(
            (m.label, s.lineno)
            for s in idx.strings
            if s.value == "attention_mask" and id(s) not in discarded
        )
        # (``pad_token_id`` is not one: nearly every tokenizer or LM config names a pad token,
        # padded batches show as padding=, a collator, an attention mask or -100 labels.)
        out.extend(
            (m.label, a.lineno)
            for a in idx.attrs
            if a.attr == "attention_mask" and id(a) not in discarded
        )
        model_inits = _model_constructors(rc, m)
        named = _named_ignore_constants(m)
        out.extend(
            (m.label, u.lineno)
            for u in idx.neg100
            if not any(lo <= u.lineno <= hi for lo, hi in model_inits)
            and u.lineno not in named.values()
        )
        out.extend((m.label, line) for line in _ignore_constant_uses(m, ignore_names))
        out.extend((m.label, line) for line in _masked_with_ignore_index(m))
        out.extend((m.label, line) for line in _mask_normalised(m))
        if m is not rc.walk.sources.main:
            # A module imported for one name: only the functions the walk ran count (an
            # audio tower's padding says nothing about an image model's batches).
            ran = _ran_lines(ran_funcs, m)
            out = [w for w in out if ran(w[1])]
        kept = [w for w in out if not _inside_any(m, w[1], no_grad)]
        if dropped is not None:
            dropped.extend(f"{f}:{line}" for f, line in out if (f, line) not in kept)
        found.extend(kept)
    found.sort(key=lambda w: (w[0] != rc.label, w[1]))
    return [f"{f}:{line}" for f, line in found]


# Bare calls whose argument lives on: a backward or step uses it, a container keeps it.
_KEEPS_ITS_ARGUMENT = {
    "backward",
    "manual_backward",
    "step",
    "append",
    "extend",
    "insert",
    "add",
    "update",
    "put",
    "setdefault",
}


def _discarded_call_args(m: Module) -> set[int]:
    """id() of the nodes inside the arguments of calls whose result is thrown away (a bare
    ``model(inputs["input_ids"], inputs["attention_mask"])``: a warm-up pass, FSDP's
    initialisation forward), except ``backward``/``step`` calls: such a pass trains on
    nothing, so its attention mask says nothing about the training batches."""
    out: set[int] = set()
    for stmt in ast.walk(m.tree):
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        if isinstance(call.func, ast.Attribute) and call.func.attr in _KEEPS_ITS_ARGUMENT:
            continue
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            out.update(id(n) for n in ast.walk(arg))
    return out


def _named_ignore_constants(m: Module) -> dict[str, int]:
    """Module-level constants bound to -100 (``IGNORE_INDEX = -100``) → their line. The
    definition is no masking: the labels are masked where the name is written into them."""
    out: dict[str, int] = {}
    for stmt in m.tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.UnaryOp)
            and isinstance(stmt.value.op, ast.USub)
            and isinstance(stmt.value.operand, ast.Constant)
            and type(stmt.value.operand.value) is int
            and stmt.value.operand.value == 100
        ):
            out[stmt.targets[0].id] = stmt.lineno
    return out


def _ignore_constant_uses(m: Module, names: set[str]) -> list[int]:
    """Lines that read such a constant (``labels[:n] = IGNORE_INDEX``,
    ``pad_sequence(..., padding_value=constants.IGNORE_INDEX)``), except as a loss's
    ``ignore_index=`` (which alone says nothing about padding)."""
    if not names:
        return []
    skip = {id(kw.value) for kw in m.index.keywords if kw.arg == "ignore_index"}
    lines = []
    for node in ast.walk(m.tree):
        if id(node) in skip or not isinstance(getattr(node, "ctx", None), ast.Load):
            continue
        if (isinstance(node, ast.Name) and node.id in names) or (
            isinstance(node, ast.Attribute) and node.attr in names
        ):
            lines.append(node.lineno)
    return lines


def _model_constructors(rc: RuleContext, m: Module) -> list[tuple[int, int]]:
    """Line spans of the ``__init__`` of the module's model classes (over ``nn.Module``): a
    -100 there fills a model's state (a queue of example ids starting empty), never a batch's
    labels, which are masked in the data pipeline or the step."""
    out = []
    for info in rc.walk.classes:
        if info.scope.module.label != m.label or info.object_kind() != V.MODEL:
            continue
        init = info.methods.get("__init__")
        if init is not None:
            out.append((init.lineno, init.end_lineno or init.lineno))
    return out


def _inside_any(m: Module, line: int, funcs: set[tuple[str, int]]) -> bool:
    """Whether ``line`` of ``m`` sits inside one of the functions ``funcs`` (by definition
    line) as its innermost enclosing function."""
    spans = [
        (n.lineno, n.end_lineno or n.lineno)
        for n in ast.walk(m.tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    if not spans:
        return False
    return (m.label, max(spans)[0]) in funcs


def _masked_with_ignore_index(m: Module) -> list[int]:
    """Lines that write a loss's ``ignore_index`` value into a tensor (``ids[n:] = PAD``,
    ``labels.masked_fill(mask, PAD)``) in a module that passes that value as ``ignore_index=``:
    targets masked by hand, so batches hold varying numbers of targets."""
    ignored = {
        ast.unparse(kw.value)
        for kw in m.index.keywords
        if kw.arg == "ignore_index" and isinstance(kw.value, (ast.Name, ast.Attribute))
    }
    if not ignored:
        return []
    lines = []
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets):
            if ast.unparse(node.value) in ignored:
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("masked_fill", "masked_fill_")
            and len(node.args) == 2
            and ast.unparse(node.args[1]) in ignored
        ):
            lines.append(node.lineno)
    return lines


def _summed_name(node: ast.expr) -> str | None:
    """``torch.sum(mask)`` / ``mask.sum()``: the summed name's text."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "sum":
        if node.args and isinstance(func.value, ast.Name) and func.value.id in ("torch", "np"):
            return ast.unparse(node.args[0])
        if not node.args:
            return ast.unparse(func.value)
    return None


def _mask_normalised(m: Module) -> list[int]:
    """Lines that divide a masked sum by the mask's own sum (``sum(x * mask) / sum(mask)``): a
    mean over the valid positions of padded sequences, whose count differs between batches."""
    lines = []
    for node in ast.walk(m.tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        mask = _summed_name(node.right)
        if mask is None or not (mask.isidentifier() or mask.replace(".", "").isidentifier()):
            continue
        numer = node.left
        if isinstance(numer, ast.Name):
            # ``kl = torch.sum(kl * mask)`` on the line before, then ``kl / torch.sum(mask)``
            name = numer.id
            before = [
                a
                for a in ast.walk(m.tree)
                if isinstance(a, ast.Assign)
                and 0 < node.lineno - a.lineno <= 3
                and any(isinstance(t, ast.Name) and t.id == name for t in a.targets)
            ]
            if before:
                numer = max(before, key=lambda a: a.lineno).value
        products = [
            n
            for n in ast.walk(numer)
            if isinstance(n, ast.BinOp)
            and isinstance(n.op, ast.Mult)
            and mask in (ast.unparse(n.left), ast.unparse(n.right))
        ]
        if products:
            lines.append(node.lineno)
    return lines


def _ran_lines(ran_funcs: set[tuple[str, int]], m: Module) -> Callable[[int], bool]:
    """Whether a line of an imported module is in code the walk ran: its top level, or a
    function called on the way (innermost enclosing function decides)."""
    ran = {line for file, line in ran_funcs if file == m.label}
    spans = sorted(
        (n.lineno, n.end_lineno or n.lineno, n.lineno in ran)
        for n in ast.walk(m.tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    )

    def check(line: int) -> bool:
        inner = [span for span in spans if span[0] <= line <= span[1]]
        return not inner or max(inner, key=lambda span: span[0])[2]

    return check


@rule(
    "How the loss is reduced, over sequences of varying length, and over whose tokens.",
    facts={
        "loss_reduction": ANY_EXCERPT,
        "variable_length_sequences": not_in_excerpt(False),
        "loss_normalised_by_global_tokens": not_in_excerpt(False),
    },
)
def loss_shape(rc: RuleContext) -> None:
    a = rc.a
    fw = rc.framework
    reduction = fw.loss_reduction() if fw is not None else SCRIPT
    if reduction is not SCRIPT:
        rc.say("loss_reduction", reduction)
    b = a.main_backward
    loss = a.loss_of(b) if b is not None else None
    if b is not None and loss is not None and reduction is SCRIPT and V.FWD in loss.taint:
        if V.SUM_RED in loss.taint:
            rc.emit(
                "loss_reduction",
                "sum",
                b.where,
                "loss is a sum over the batch (reduction='sum', .sum(), or a mean times the batch size)",
            )
        elif V.MEAN_RED in loss.taint:
            rc.emit("loss_reduction", "mean", b.where, "loss is a mean over the batch")
    dropped: list[str] = []
    signals = _token_signals(rc, dropped)
    if not signals:
        signals = _collate_pads(rc)
    if not signals and dropped:
        # only an evaluation (run without gradients) pads or masks its texts: the training
        # batches may or may not; neither value is read
        rc.warn(
            f"{dropped[0]}: padding only in code that runs without gradients (an evaluation); "
            "variable-length sequences not decided"
        )
        return
    tokenized = (
        signals
        or any(o.canon == "tokenizer" or "Tokenizer" in o.canon for o in a.objects.values())
        or any(e.result is not None and e.result.kind == "tokenizer" for e in a.events)
    )
    dense = _dense_loss(rc, loss) if signals and loss is not None else None
    if dense is not None:
        # captions padded for a text encoder, an image regressed: padding of a conditioning
        # input, not a loss averaged over tokens of varying count
        rc.warn(
            f"{signals[0]}: padding found, but the trained loss is {dense} on dense outputs; "
            "variable-length sequences not decided"
        )
        return
    scorer = _sequence_scorer(rc) if signals else None
    if scorer is not None:
        # a reward model or classifier: one score per (padded) sequence, so the loss counts
        # sequences, not a varying number of target tokens
        rc.warn(
            f"{signals[0]}: padding found, but the trained model scores whole sequences "
            f"({scorer}); variable-length targets not decided"
        )
        return
    if signals:
        rc.emit(
            "variable_length_sequences",
            True,
            signals[0],
            f"padding / label masking ({signals[0]})",
        )
    elif not tokenized and (a.main_backward is not None) and not _data_from_elsewhere(rc):
        rc.emit(
            "variable_length_sequences",
            False,
            a.main_backward.where,
            "fixed-size examples: no padding or label masking",
        )
    else:
        return
    if not signals:
        return
    norm = fw.global_token_norm() if fw is not None else SCRIPT
    if norm is not SCRIPT:
        rc.say("loss_normalised_by_global_tokens", norm)
        return
    if b is None or loss is None or V.FWD not in loss.taint:
        return
    if V.NORM_GLOBAL in loss.taint:
        rc.emit(
            "loss_normalised_by_global_tokens",
            True,
            b.where,
            "loss divided by a token count summed across ranks",
        )
    elif V.MEAN_RED in loss.taint:
        where = _loss_line(rc, loss) or b.where
        rc.emit(
            "loss_normalised_by_global_tokens",
            False,
            where,
            f"per-rank mean over this batch's tokens ({where}): ranks with few tokens weigh as much as full ones",
        )


# Losses that regress dense outputs (pixels, latents, noise) rather than classify tokens.
DENSE_LOSSES = {
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "HuberLoss",
}


TOKEN_LOSSES = {"cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"}


def _dense_loss(rc: RuleContext, loss: Val) -> str | None:
    """The regression loss the step trains on (``F.mse_loss(pred, noise)``, an ``MSELoss``
    criterion) when the step computes no token loss (no cross-entropy, no model called with
    ``labels=``); None otherwise."""
    b = rc.a.main_backward
    if b is None or V.FWD not in loss.taint:
        return None
    loops = b.loops()
    scope = [e for e in rc.a.calls() if not loops or loops[-1] in e.ctx]
    names = {apis.last(e.name) or (e.method or "") for e in scope}
    names |= {apis.last(o.canon) for o in rc.a.objs(V.CRITERION)}
    if names & TOKEN_LOSSES or any("labels" in e.kwargs for e in scope):
        return None
    dense = sorted(names & DENSE_LOSSES)
    return dense[0] if dense else None


def _sequence_scorer(rc: RuleContext) -> str | None:
    """The trained models (wrapped for DDP, or handed to a Trainer; failing both, every model)
    all give one output per sequence (``AutoModelForSequenceClassification``): where."""
    models = rc.a.objs(V.MODEL)
    handed = {
        v.ref
        for t in rc.a.objs(V.TRAINER)
        for v in (t.kwargs.get("model"), *t.args[:1])
        if v is not None and v.ref is not None
    }
    trained = [o for o in models if o.wrapped_by is not None or o.ref in handed] or models
    if trained and all("ForSequenceClassification" in o.canon for o in trained):
        return (
            f"{apis.last(trained[0].canon.removesuffix('.from_pretrained'))} at {trained[0].where}"
        )
    return None


def _loss_line(rc: RuleContext, loss: Val) -> str | None:
    """Where the loss was reduced: the criterion call feeding the backward."""
    seqs = [int(t.split(":", 1)[1]) for t in loss.taint if t.startswith("fwdseq:")]
    if not seqs:
        return None
    fwd = rc.a.by_seq.get(seqs[-1])
    if fwd is None:
        return None
    for e in rc.a.events:
        if e.seq <= fwd.seq or e.kind != "call" or e.result is None:
            continue
        if f"fwdseq:{fwd.seq}" in e.result.taint and V.MEAN_RED in e.result.taint:
            return e.where
        if e.seq > fwd.seq + 40:
            break
    return fwd.where


def _collate_pads(rc: RuleContext) -> list[str]:
    """The training loader's ``collate_fn`` is the project's own (a function, or an object
    whose class defines ``__call__``) and sizes the batch by its longest sample
    (``max(x.size(1) for x in batch)``, ``max(len(x) ...)``): it pads by hand. The DataLoader
    calls it, so the walk never runs it."""
    loader = rc.training_loader()
    fn = loader.kwargs.get("collate_fn") if loader is not None else None
    if fn is None:
        return []
    node: ast.AST | None = None
    label = ""
    if isinstance(fn.const, FuncRef):
        node, label = fn.const.node, fn.const.scope.module.label
    else:
        info = rc._class_of(rc.obj(fn))
        found = info.find_method("__call__") if info is not None else None
        if found is not None:
            node, label = found[1], found[0].scope.module.label
    if node is None:
        return []
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Name)
            and sub.func.id == "max"
            and any(_is_length(n) for a in sub.args for n in ast.walk(a))
        ):
            return [f"{label}:{sub.lineno}"]
    return []


def _is_length(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "len":
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr == "size":
            return True
    return isinstance(node, ast.Attribute) and node.attr == "shape"


def _data_from_elsewhere(rc: RuleContext) -> bool:
    loader = rc.training_loader()
    if loader is None:
        return bool(rc.walk.sources.missing)
    ds = loader.kwargs.get("dataset")
    obj = rc.obj(ds)
    return obj is None and ds is not None and (V.UNBOUND in ds.taint or ds.kind is None)
