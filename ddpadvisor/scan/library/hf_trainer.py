"""What a subclass of the HF ``transformers.Trainer`` takes over from it, read from the methods
it overrides.

The Trainer shards the data, accumulates and normalises the loss itself. A subclass that
overrides ``get_train_dataloader`` or ``compute_loss`` takes that part over, and the scan must
read the override instead of assuming the framework's behaviour:

- ``Trainer._get_dataloader`` hands the DataLoader it builds to ``accelerator.prepare``, which
  shards it per process; a DataLoader returned by an override is used as it is.
  https://github.com/huggingface/transformers/blob/main/src/transformers/trainer.py
- ``Trainer.training_step`` divides the loss by the accumulation steps only when it was not
  normalised by ``num_items_in_batch`` (the target-token count of the whole accumulated batch,
  on every rank): when the model's forward accepts loss kwargs and a count was taken (the batch
  has ``labels``), or ``compute_loss_func`` is set, the loss counts as already scaled
  (``loss_is_scaled_for_ga`` overrides that guess). An override that drops the count and
  returns a micro-batch mean is then summed over the micro-batches, not averaged.
  https://github.com/huggingface/transformers/blob/main/src/transformers/trainer.py
  https://github.com/huggingface/transformers/pull/34198
  https://github.com/huggingface/trl/pull/5710
- the Trainer passes the epoch to its loader each epoch (``set_epoch`` on accelerate's
  prepared loader), which hands it on only to a sampler that has ``set_epoch``. A subclass
  whose ``_get_train_sampler`` returns its own sampler (LLaVA's length-grouped one), and TRL's
  GRPOTrainer and RLOOTrainer, whose ``_get_train_sampler`` returns TRL's ``RepeatSampler``
  (no ``set_epoch``), decide the epoch handling themselves.
  https://github.com/huggingface/trl/blob/main/trl/trainer/grpo_trainer.py
  https://github.com/huggingface/trl/blob/main/trl/trainer/rloo_trainer.py
  https://github.com/huggingface/trl/blob/main/trl/trainer/utils.py (``RepeatSampler``)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ddpadvisor.scan.interp.frames import ClassInfo

COUNT = "num_items_in_batch"


@dataclass(frozen=True)
class Decided:
    """A fact an override decides: its value, the line that shows it and why."""

    value: bool
    where: str
    why: str
    by_count: bool = False  # normalised by num_items_in_batch, the Trainer's token count


def _where(info: ClassInfo, node: ast.AST) -> str:
    return f"{info.scope.module.label}:{getattr(node, 'lineno', info.node.lineno)}"


def _last(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _calls(fn: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call)]


def _calls_super(fn: ast.AST, method: str) -> bool:
    for c in _calls(fn):
        f = c.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr == method
            and isinstance(f.value, ast.Call)
            and _last(f.value.func) == "super"
        ):
            return True
    return False


def _override(info: ClassInfo, method: str) -> tuple[ClassInfo, ast.AST] | None:
    found = info.find_method(method)
    return None if found is None else (found[0], found[1])


# The methods in which the Trainer shards the data, scales the loss and runs the loop.
LOOP_METHODS = ("compute_loss", "training_step", "get_train_dataloader", "_inner_training_loop")


def loop_overrides(info: ClassInfo) -> list[str]:
    """The loop methods a Trainer subclass replaces without calling the Trainer's own."""
    out = []
    for method in LOOP_METHODS:
        found = _override(info, method)
        if found is not None and not _calls_super(found[1], method):
            out.append(method)
    return out


# -- _get_train_sampler -----------------------------------------------------------------------

# Library trainers whose ``_get_train_sampler`` returns a sampler of their own (module docstring).
OWN_SAMPLER_TRAINERS = frozenset({"GRPOTrainer", "RLOOTrainer"})


def own_sampler(info: ClassInfo | None, canon: str | None) -> str | None:
    """Where the Trainer's training sampler is the subclass's or the library trainer's own
    (not the Trainer's RandomSampler), else None."""
    if info is not None:
        found = _override(info, "_get_train_sampler")
        if found is not None:
            owner, fn = found
            returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
            if any(not _trainers_sampler(r.value) for r in returns):
                return _where(owner, fn)
        bases = [b.rsplit(".", 1)[-1] for b in info.external_bases()]
    else:
        bases = []
    if canon is not None:
        bases.append(canon.rsplit(".", 1)[-1])
    named = next((b for b in bases if b in OWN_SAMPLER_TRAINERS), None)
    return f"{named}._get_train_sampler" if named else None


def _trainers_sampler(node: ast.AST | None) -> bool:
    """A return of the Trainer's own sampler (``super()._get_train_sampler(...)``,
    ``Trainer._get_train_sampler(self, ...)``), or of a SequentialSampler, whose fixed order
    has no epoch to set."""
    if not isinstance(node, ast.Call):
        return False
    if _last(node.func) == "SequentialSampler":
        return True
    return isinstance(node.func, ast.Attribute) and node.func.attr == "_get_train_sampler"


# -- get_train_dataloader ---------------------------------------------------------------------

_SHARDING = {"DistributedSampler", "split_dataset_by_node", "prepare", "prepare_data_loader"}
_NOT_SHARDING = {"RandomSampler", "SequentialSampler", "_get_train_sampler"}


def train_loader(info: ClassInfo) -> Decided | None:
    """Whether an overridden ``get_train_dataloader`` shards the data by rank (None: no
    override, or one whose loader the scan cannot decide)."""
    found = _override(info, "get_train_dataloader")
    if found is None:
        return None
    owner, fn = found
    if _calls_super(fn, "get_train_dataloader"):
        return None  # the Trainer's own loader, prepared by accelerate
    calls = _calls(fn)
    for c in calls:
        if _last(c.func) in _SHARDING:
            return Decided(
                True,
                _where(owner, c),
                f"get_train_dataloader shards its loader ({_last(c.func)})",
            )
    loaders = [c for c in calls if _last(c.func) == "DataLoader"]
    if not loaders:
        return None
    for c in loaders:
        for kw in c.keywords:
            if kw.arg in ("sampler", "batch_sampler") and not (
                isinstance(kw.value, ast.Call) and _last(kw.value.func) in _NOT_SHARDING
            ):
                return None  # a sampler the scan does not follow
    return Decided(
        False,
        _where(owner, loaders[0]),
        "get_train_dataloader returns a plain DataLoader: the Trainer only shards the loader "
        "it builds itself (accelerator.prepare), so every rank reads the whole dataset",
    )


# -- compute_loss -----------------------------------------------------------------------------


def _params(fn: ast.AST) -> tuple[set[str], str | None]:
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    a = fn.args
    names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    return names, a.kwarg.arg if a.kwarg else None


def _uses_count(fn: ast.AST, kwarg: str | None) -> bool:
    """The override reads num_items_in_batch, or passes its **kwargs on (to the model or to
    the Trainer's own compute_loss), where the count is used."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == COUNT and isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, ast.Constant) and n.value == COUNT:
            return True
        if (
            isinstance(n, ast.keyword)
            and n.arg is None
            and isinstance(n.value, ast.Name)
            and n.value.id == kwarg
        ):
            return True
    return False


def _divides_by_accumulation(fn: ast.AST) -> ast.AST | None:
    for n in ast.walk(fn):
        if isinstance(n, (ast.BinOp, ast.AugAssign)) and isinstance(n.op, ast.Div):
            right = n.right if isinstance(n, ast.BinOp) else n.value
            if "gradient_accumulation_steps" in ast.unparse(right):
                return n
    return None


def _reads_labels(fn: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == "labels" for n in ast.walk(fn))


def _declared_scaled(info: ClassInfo) -> bool | None:
    """What the subclass tells the Trainer about its loss: ``loss_is_scaled_for_ga`` (True:
    already scaled), or ``model_accepts_loss_kwargs = False`` (so the Trainer divides), set in
    the class body or on ``self`` in a method (TRL's trainers do the latter)."""
    found: bool | None = None
    for cls in info.mro():
        for n in ast.walk(cls.node):
            if not isinstance(n, (ast.Assign, ast.AnnAssign)) or not isinstance(
                n.value, ast.Constant
            ):
                continue
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "")
                value = n.value.value
                if name == "loss_is_scaled_for_ga" and isinstance(value, bool):
                    return value
                if name == "model_accepts_loss_kwargs" and value is False:
                    found = False
    return found


def loss_scaled_for_accumulation(
    info: ClassInfo, model_takes_loss_kwargs: bool | None, labels_in_batch: bool = False
) -> Decided | None:
    """Whether the loss of an overridden ``compute_loss`` ends up divided over the accumulation
    window (None: no override, or the scan cannot tell). The Trainer counts the tokens only
    when the batch has ``labels`` (``labels_in_batch``: the script puts them there)."""
    found = _override(info, "compute_loss")
    if found is None:
        return None
    owner, fn = found
    where = _where(owner, fn)
    if _calls_super(fn, "compute_loss"):
        return None
    declared = _declared_scaled(info)
    _, kwarg = _params(fn)
    if (div := _divides_by_accumulation(fn)) is not None:
        return Decided(
            True,
            _where(owner, div),
            "compute_loss divides the loss by gradient_accumulation_steps",
        )
    if _uses_count(fn, kwarg):
        return Decided(
            True,
            where,
            f"compute_loss normalises by {COUNT} (the target tokens of the whole accumulated "
            "batch)",
            by_count=True,
        )
    if declared is False:
        return Decided(
            True,
            where,
            "loss_is_scaled_for_ga = False: the Trainer divides the loss by the accumulation steps",
        )
    if declared is None and model_takes_loss_kwargs is False:
        return Decided(
            True,
            where,
            "the model takes no loss kwargs, so the Trainer divides the loss by the "
            "accumulation steps",
        )
    if declared is None and (
        model_takes_loss_kwargs is None or not (labels_in_batch or _reads_labels(fn))
    ):
        return None  # whether the Trainer counts the tokens depends on the model and the batch
    return Decided(
        False,
        where,
        f"compute_loss ignores {COUNT} and returns a micro-batch mean, but the Trainer counts "
        "it as normalised over the accumulated batch "
        + (
            "(loss_is_scaled_for_ga = True)"
            if declared
            else "(the model accepts loss kwargs and the batch has labels)"
        )
        + ", so it never divides by gradient_accumulation_steps",
    )


LABEL_COLLATORS = (
    "DataCollatorForLanguageModeling",
    "DataCollatorForSeq2Seq",
    "DataCollatorForCompletionOnlyLM",
)


def script_labels(tree: ast.AST) -> bool:
    """The script builds batches with a ``labels`` key (a literal key or subscript, or a
    collator that adds them)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and n.value == "labels":
            return True
        if isinstance(n, ast.Call) and _last(n.func) in LABEL_COLLATORS:
            return True
    return False


def model_takes_loss_kwargs(model_class: ClassInfo | None, hf_model: bool) -> bool | None:
    """``Trainer.model_accepts_loss_kwargs``: a model's ``accepts_loss_kwargs`` or a forward
    with ``**kwargs``; transformers' own models take them."""
    if model_class is not None:
        flag = model_class.find_attr("accepts_loss_kwargs")
        if flag is not None and isinstance(flag.const, bool):
            return flag.const
        found = model_class.find_method("forward")
        if found is not None:
            _, kwarg = _params(found[1])
            return kwarg is not None
        return None
    return True if hf_model else None


# -- the world size in compute_loss -----------------------------------------------------------

# What holds the number of processes where a Trainer subclass can reach it: its accelerator's
# ``num_processes``, ``TrainingArguments.world_size``, ``torch.distributed.get_world_size()``
# and the ``WORLD_SIZE`` variable torchrun sets.
_WORLD_NAMES = ("num_processes", "world_size", "get_world_size")


def _world(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in _WORLD_NAMES:
            return True
        if isinstance(n, ast.Name) and n.id in _WORLD_NAMES:
            return True
        if isinstance(n, ast.Constant) and n.value == "WORLD_SIZE":
            return True
    return False


def _returned_exprs(fn: ast.AST) -> list[ast.AST]:
    """The nodes that make the returned loss: those inside ``return`` statements and inside
    the assignments (plain or augmented) of the names those statements return."""
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    names = {
        x.id
        for r in returns
        for x in ast.walk(r.value)  # type: ignore[arg-type]
        if isinstance(x, ast.Name)
    }
    out: list[ast.AST] = [x for r in returns for x in ast.walk(r)]
    for n in ast.walk(fn):
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            if n.target.id in names:
                out.append(n)
                out.extend(ast.walk(n.value))
        elif isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in names for t in n.targets
        ):
            out.extend(ast.walk(n.value))
    return out


def loss_world_factor(info: ClassInfo) -> tuple[str, Decided] | None:
    """What an overridden ``compute_loss`` does with the world size: ("div", …) when it
    divides its loss by the number of processes, ("mul", …) when it multiplies it without
    normalising by the global token count (``num_items_in_batch``, summed over all processes,
    which the multiplication undoes as the Trainer itself does); None when it does neither or
    there is no override. The returned loss goes to ``training_step``'s backward, where DDP
    averages the gradients over the processes once more."""
    found = _override(info, "compute_loss")
    if found is None:
        return None
    owner, fn = found
    _, kwarg = _params(fn)
    for n in _returned_exprs(fn):
        if isinstance(n, ast.BinOp):
            right = n.right
        elif isinstance(n, ast.AugAssign):
            right = n.value
        else:
            continue
        if isinstance(n.op, ast.Div) and _world(right):
            return "div", Decided(
                True,
                _where(owner, n),
                "compute_loss divides the loss by the number of processes; DDP averages the "
                "gradients over them again",
            )
        if isinstance(n.op, ast.Mult) and (
            _world(right) or (isinstance(n, ast.BinOp) and _world(n.left))
        ):
            if _uses_count(fn, kwarg):
                return None  # a loss over the global token count, multiplied back: a mean
            return "mul", Decided(
                True,
                _where(owner, n),
                "compute_loss multiplies the loss by the number of processes; DDP already "
                "averages the gradients",
            )
    return None
