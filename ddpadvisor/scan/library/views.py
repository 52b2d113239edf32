"""Each framework's view of the job, built once per scan.

A framework that runs the training loop (the HF ``Trainer``, a Lightning ``Trainer``) or the
parts of it the script hands over (an accelerate ``Accelerator``) decides some facts by its own
configuration: whether it shards the loader, how many micro-batches it accumulates and from
which argument, whether it clips and at what threshold, which precision flag is set. A view
answers those questions in the framework's terms, from the objects the walk built, so that the
rules ask ``rc.framework`` instead of branching on which framework it is.

Every question returns one of:

- :data:`SCRIPT`: the framework leaves it to the script's own code, which the rule reads as it
  reads a hand-written loop;
- an :class:`Answer` (a value, the line that shows it, why) or a :class:`Open` (the framework
  decides it, but from something the scan cannot read: a warning that says why);
- None: the framework decides it, and nothing the scan read says how (the fact stays unknown
  without a warning);
- for questions with several parts, a small dataclass of those.

The base class answers :data:`SCRIPT` to every question; a framework's class overrides what
it decides. Sources for what each framework does: :mod:`.hf_trainer` and :mod:`.lightning`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.interp.frames import ClassInfo
from ddpadvisor.scan.library import hf_trainer, lightning
from ddpadvisor.scan.library.common import TRAINING_ARGS
from ddpadvisor.scan.values import Obj, Val

if TYPE_CHECKING:
    from ddpadvisor.scan.analysis import Analysis

Value = bool | int | float | str


class Script:
    """The framework leaves this to the script's own code (see :data:`SCRIPT`)."""

    def __repr__(self) -> str:
        return "SCRIPT"


SCRIPT: Final = Script()


@dataclass(frozen=True)
class Answer:
    """What the framework's configuration decides: the value, the line that shows it, why."""

    value: Value
    where: str
    why: str


@dataclass(frozen=True)
class Open:
    """The framework decides it from something the scan cannot read; ``why`` is the warning."""

    why: str


Said = Answer | Open | None


@dataclass(frozen=True)
class Accumulation:
    """How the framework accumulates: the count, whether it divides the loss by it, whether
    it zeroes gradients on every micro-step."""

    count: Answer | None = None
    loss_divided: Said = None
    zero_grad_every_micro_step: Said = None


@dataclass(frozen=True)
class Sync:
    """Whether the framework skips the gradient all-reduce on accumulating micro-batches,
    and whether the last one synchronises."""

    skips: Said = None
    last_synced: Said = None


@dataclass(frozen=True)
class Clipping:
    """Whether the framework clips, unscales before it, and clips inside no_sync."""

    clips: Said = None
    unscales_first: Said = None
    inside_no_sync: Said = None


@dataclass(frozen=True)
class Optimizer:
    family: Said = None
    beta2: Said = None


@dataclass(frozen=True)
class Warmup:
    steps: Said = None
    scheduler_per_step: Said = None


@dataclass(frozen=True)
class LoggedLoss:
    rank0_only: Said = None
    reduction_wrong: Said = None


def class_of(o: Obj | None) -> ClassInfo | None:
    """The script's own class an object was built from, if any."""
    if o is None:
        return None
    info = o.extra.get("class")
    return info if isinstance(info, ClassInfo) else None


class FrameworkView:
    """A framework's answers; the base answers :data:`SCRIPT` to everything."""

    name = ""
    where = ""  # the line that builds the framework's object
    # The framework runs the training loop (calls the forward, backward, step) itself.
    drives_loop = False

    def __init__(self, a: Analysis) -> None:
        self.a = a
        self.label = a.walk.sources.main.label

    def obj(self, val: Val | None) -> Obj | None:
        if val is None or val.ref is None:
            return None
        return self.a.objects.get(val.ref)

    @property
    def manual(self) -> bool:
        """The user's own code runs backward, step and zero_grad (Lightning's manual
        optimization)."""
        return False

    # ---------------------------------------------------------------- questions
    def note(self) -> str | None:
        """A warning that says what the framework takes over."""
        return None

    def runs_loop(self) -> Said | Script:
        """``hand_written_loop``: whether the training loop is the script's own."""
        return SCRIPT

    def shards_loader(self) -> Said | Script:
        return SCRIPT

    def sets_epoch(self) -> Said | Script:
        return SCRIPT

    def accumulation(self) -> Accumulation | Script:
        return SCRIPT

    def sync(self) -> Sync | Script:
        return SCRIPT

    def forward_through_wrapper(self) -> Said | Script:
        """``forward_bypasses_ddp`` as the framework calls the forward."""
        return SCRIPT

    def trained_loss(self) -> tuple[Val, str] | Script | None:
        """The loss that goes to backward and where, when the framework calls backward on a
        loss the script returns (None: not read)."""
        return SCRIPT

    def averages_gradients(self) -> bool:
        """The framework wraps the model so that gradients are averaged across ranks, even
        where the walk saw no DDP wrap."""
        return False

    def loss_world_factor(self, op: str) -> Said | Script:
        """Whether the loss the framework trains is multiplied (``op="mul"``) or divided
        (``"div"``) by the world size."""
        return SCRIPT

    def loss_reduction(self) -> Said | Script:
        return SCRIPT

    def global_token_norm(self) -> Said | Script:
        """``loss_normalised_by_global_tokens`` where padding is seen."""
        return SCRIPT

    def clipping(self) -> Clipping | Script:
        return SCRIPT

    def precision(self) -> Said | Script:
        """The training precision; an Answer's ``where`` is also where the framework decides
        the GradScaler."""
        return SCRIPT

    def scales_loss(self) -> bool:
        """The framework scales an fp16 loss itself (no GradScaler in the script)."""
        return False

    def shards_state(self) -> Said | Script:
        """``uses_fsdp_or_zero``."""
        return SCRIPT

    def compiles(self) -> Said | Script:
        return SCRIPT

    def broadcast_buffers_disabled(self) -> Said | Script:
        return SCRIPT

    def optimizer(self) -> Optimizer | Script:
        return SCRIPT

    def warmup(self) -> Warmup | Script:
        return SCRIPT

    def rank_conditional_resume(self) -> Said | Script:
        """``rank_conditional_state_change`` as the framework loads checkpoints."""
        return SCRIPT

    def adapters_before_wrap(self) -> Said | Script:
        """``module_created_after_wrap`` as the framework wraps the model."""
        return SCRIPT

    def trained_models(self) -> list[Obj] | Script:
        """The models the framework trains, where the script hands them to it (the walk saw
        no DDP wrap of them)."""
        return SCRIPT

    def learning_rate(self) -> tuple[Val, str, str] | Script | None:
        """The learning rate as the script computes it: (value, where, what)."""
        return SCRIPT

    def per_device_batch(self) -> Said | Script:
        return SCRIPT

    def logged_loss(self) -> LoggedLoss | Script:
        return SCRIPT


# ====================================================================== HF Trainer
class HFTrainerView(FrameworkView):
    """A ``transformers.Trainer`` (or a subclass, or TRL's): its TrainingArguments decide the
    loop, unless a subclass overrides the methods that do (:mod:`.hf_trainer`)."""

    name = "hf_trainer"
    drives_loop = True

    def __init__(self, a: Analysis) -> None:
        super().__init__(a)
        found = a.objs(V.TRAINER)
        self.trainer: Obj | None = found[0] if found else None
        self.where = self.trainer.where if self.trainer is not None else ""
        self.info = class_of(self.trainer)
        # The methods of the loop a subclass takes over.
        self.overrides = hf_trainer.loop_overrides(self.info) if self.info is not None else []
        self._own_loss: tuple[hf_trainer.Decided | None] | None = None

    def model(self) -> Val | None:
        """The model handed to the Trainer (``model=`` or its first argument)."""
        tr = self.trainer
        if tr is None:
            return None
        return tr.kwargs.get("model") or (tr.args[0] if tr.args else None)

    def training_args(self) -> Obj | None:
        tr = self.trainer
        if tr is not None:
            args = self.obj(tr.kwargs.get("args"))
            if args is not None and args.kind in (V.TRAINING_ARGS, V.INSTANCE):
                return args
        found = self.a.objs(V.TRAINING_ARGS) or [
            o
            for o in self.a.objs(V.INSTANCE)
            if (info := class_of(o)) is not None
            and any(apis.last(b) in TRAINING_ARGS for b in info.external_bases())
        ]
        return found[0] if found else None

    def arg(self, name: str, *, flow: bool = False) -> tuple[Val | None, str]:
        """A TrainingArguments field: (value or None when set on the command line, where).
        ``flow``: the value as the script computes it even when it starts from a command-line
        value (``learning_rate=args.lr * world_size``: its world-size factor is the code's).
        A field the script does not set is ``Val(const=None)`` tainted ``default``."""
        args = self.training_args()
        if args is None:
            return None, ""
        if name in args.kwargs or name in args.attrs:
            val = args.kwargs[name] if name in args.kwargs else args.attrs[name]
            if flow:
                return val, args.where
            if V.ARGDEFAULT in val.taint or V.UNBOUND in val.taint:
                return None, args.where  # the script passes its own command-line value
            return val, args.where
        if args.extra.get("from_cli"):
            return None, args.where  # set on the command line: library defaults are guesses
        node = args.node
        if isinstance(node, ast.Call) and any(k.arg is None for k in node.keywords):
            # ``TrainingArguments(**kwargs)`` built from the run's config: a field not among
            # the keys the scan read may be in the mapping; its default is only a fallback
            return None, args.where
        return Val(const=None, taint=frozenset({"default"})), args.where

    def own_loss(self) -> hf_trainer.Decided | None:
        """What a Trainer subclass's own compute_loss does to accumulation scaling."""
        if self._own_loss is None:
            self._own_loss = (self._read_own_loss(),)
        return self._own_loss[0]

    def _read_own_loss(self) -> hf_trainer.Decided | None:
        info = self.info
        if info is None:
            return None
        model = self.obj(self.model())
        hf_model = any(
            e.name.startswith(("transformers.", "peft.")) and _is_model_factory(apis.last(e.name))
            for e in self.a.calls()
        )
        sources = self.a.walk.sources
        labels = any(hf_trainer.script_labels(m.tree) for m in sources.modules.values())
        labels = labels or hf_trainer.script_labels(sources.main.tree)
        return hf_trainer.loss_scaled_for_accumulation(
            info, hf_trainer.model_takes_loss_kwargs(class_of(model), hf_model), labels
        )

    # ---------------------------------------------------------------- questions
    def note(self) -> str | None:
        return (
            f"{self.where or self.label}: HF Trainer script: data sharding, set_epoch, "
            "accumulation and gradient sync are handled by the framework"
        )

    def runs_loop(self) -> Said:
        if self.overrides:
            # the subclass does part of the loop's job itself (loss scaling, sharding): the
            # framework no longer vouches for it, so the fact is left to the other evidence
            return Open(
                f"{self.where or self.label}: the Trainer subclass overrides "
                f"{', '.join(self.overrides)}; that part of the loop is read as the script's "
                "own code"
            )
        return Answer(False, self.where, "the HF Trainer runs the training loop")

    def shards_loader(self) -> Said:
        own = hf_trainer.train_loader(self.info) if self.info is not None else None
        if own is not None:
            return Answer(own.value, own.where, own.why)
        if self.info is None or self.info.find_method("get_train_dataloader") is None:
            return Answer(
                True,
                self.where,
                "HF Trainer shards its DataLoader per process (accelerator.prepare)",
            )
        return Open(
            f"{self.where or self.label}: get_train_dataloader is overridden; "
            "whether it shards the data is not decided"
        )

    def sets_epoch(self) -> Said:
        if "get_train_dataloader" in self.overrides:
            return None  # the subclass's own loader: the Trainer's epoch handling may not reach it
        canon = self.trainer.canon if self.trainer is not None else None
        own = hf_trainer.own_sampler(self.info, canon)
        if own is not None:
            return Open(
                f"{self.where or self.label}: the training sampler is the trainer's own ({own}); "
                "whether the epoch reaches it is not decided"
            )
        stream = self._iterable_train_dataset()
        if stream is not None:
            return Open(
                f"{self.where or self.label}: the training dataset is an IterableDataset "
                f"({stream}): the Trainer has no sampler whose epoch it sets, and the class "
                "has no set_epoch of its own; whether each pass reshuffles is not decided"
            )
        return Answer(True, self.where, "HF Trainer calls set_epoch on its sampler each epoch")

    def _iterable_train_dataset(self) -> str | None:
        """The project's IterableDataset class the Trainer is handed as ``train_dataset``,
        when it defines no ``set_epoch`` (the Trainer calls one on the dataset if it has it)."""
        tr = self.trainer
        val = tr.kwargs.get("train_dataset") if tr is not None else None
        obj = self.a.objects.get(val.ref) if val is not None and val.ref is not None else None
        info = class_of(obj)
        if info is None or info.find_method("set_epoch") is not None:
            return None
        if any(apis.last(b) == "IterableDataset" for b in info.external_bases()):
            return info.name
        return None

    def accumulation(self) -> Accumulation:
        val, where = self.arg("gradient_accumulation_steps")
        count: Answer | None = None
        k = _num(val)
        k_int: int | None = None
        if val is not None and (val.known or "default" in val.taint):
            k_int = int(k) if k is not None else 1
            count = Answer(k_int, where, f"TrainingArguments(gradient_accumulation_steps={k_int})")
        own = self.own_loss()
        overridden = "compute_loss" in self.overrides
        divided: Said = None
        if own is not None and k_int is not None and k_int >= 2:
            divided = Answer(own.value, own.where, own.why)
        elif own is not None and k_int is None and not own.value:
            divided = Open(f"{own.where}: {own.why} (if the run accumulates)")
        elif overridden and own is None:
            divided = Open(
                f"{where or self.label}: compute_loss is overridden; whether its loss is scaled "
                "for accumulation is not decided"
            )
        elif k_int is not None and k_int >= 2:
            divided = Answer(True, where, "HF Trainer scales the loss for accumulation")
        zero = Answer(False, where, "HF Trainer zeroes gradients once per optimizer step")
        return Accumulation(count, divided, zero)

    def sync(self) -> Sync:
        return Sync(None, Answer(True, "", "HF Trainer synchronises the last micro-step"))

    def forward_through_wrapper(self) -> Said:
        return None

    def loss_world_factor(self, op: str) -> Said:
        """The Trainer's own compute_loss has no world size; a subclass's override may
        (library/hf_trainer.py). Where the script builds several Trainers (one per stage or
        option), it holds only when all of them agree."""
        infos = [class_of(o) for o in self.a.objs(V.TRAINER)]
        verdicts = [
            hf_trainer.loss_world_factor(info) if info is not None else None for info in infos
        ]
        mine = [v[1] for v in verdicts if v is not None and v[0] == op]
        if not mine:
            return Answer(False, "", "HF Trainer computes the loss")
        if len(mine) < len(verdicts):
            fact = "loss_multiplied_by_world_size" if op == "mul" else "loss_divided_by_world_size"
            return Open(
                f"{mine[0].where}: {mine[0].why}, but only {len(mine)} of the {len(verdicts)} "
                f"Trainers the script builds do so; {fact} depends on which one runs; not decided"
            )
        return Answer(True, mine[0].where, mine[0].why)

    def loss_reduction(self) -> Said:
        return Answer("mean", "", "HF models return a mean loss")

    def global_token_norm(self) -> Said:
        own = self.own_loss()
        if own is not None and not own.value:
            return Answer(
                False,
                own.where,
                "compute_loss returns each micro-batch's own mean and drops num_items_in_batch",
            )
        val, where = self.arg("average_tokens_across_devices")
        if own is not None and own.by_count and not (val is not None and val.const is False):
            return Answer(
                True,
                own.where,
                "compute_loss divides by num_items_in_batch, the target tokens of every "
                "micro-batch (on every rank unless average_tokens_across_devices=False)",
            )
        if val is not None and val.known and val.const is True:
            return Answer(True, where, "average_tokens_across_devices=True")
        return None

    def clipping(self) -> Clipping | Script:
        val, where = self.arg("max_grad_norm")
        if val is None:
            return Clipping()
        n = _num(val)
        clips: Said = None
        if "default" in val.taint or "cli" in val.taint:
            clips = Answer(True, where, "HF Trainer clips at max_grad_norm=1.0 by default")
        elif n is not None:
            clips = Answer(n > 0, where, f"TrainingArguments(max_grad_norm={n:g})")
        return Clipping(
            clips,
            Answer(True, where, "HF Trainer unscales before clipping"),
            Answer(False, where, "HF Trainer clips after the synchronised step"),
        )

    def precision(self) -> Said:
        fp16, where = self.arg("fp16")
        bf16, _ = self.arg("bf16")
        if (
            fp16 is not None
            and bf16 is not None
            and (fp16.known or "default" in fp16.taint)
            and (bf16.known or "default" in bf16.taint)
        ):
            if _const(fp16) is True:
                return Answer("fp16_amp", where, "TrainingArguments(fp16=True)")
            if _const(bf16) is True:
                return Answer("bf16_amp", where, "TrainingArguments(bf16=True)")
            return Answer("fp32", where, "TrainingArguments without fp16/bf16")
        return None

    def shards_state(self) -> Said:
        if self.training_args() is None:
            return None
        where = ""
        unread: list[str] = []
        for key in ("fsdp", "deepspeed"):
            val, where = self.arg(key)
            if val is not None and val.known and val.const not in (None, "", False):
                return Answer(True, where, f"TrainingArguments({key}=…)")
            if val is None or not (val.known or "default" in val.taint):
                unread.append(key)  # a command-line value (``deepspeed=args.deepspeed``)
        if unread:
            # Either key set from the run's options may name a ZeRO config or an FSDP policy:
            # the other key's absence decides nothing.
            return Open(
                f"{where}: TrainingArguments({', '.join(unread)}=…) comes from the run's "
                "options; uses_fsdp_or_zero not decided"
            )
        return Answer(False, where, "TrainingArguments without fsdp/deepspeed")

    def compiles(self) -> Said:
        val, where = self.arg("torch_compile")
        if val is not None and (val.known or "default" in val.taint):
            return Answer(_const(val) is True, where, "TrainingArguments(torch_compile=…)")
        return None

    def broadcast_buffers_disabled(self) -> Said:
        val, where = self.arg("ddp_broadcast_buffers")
        if val is not None and val.known and val.const is not None:
            return Answer(
                val.const is False, where, f"TrainingArguments(ddp_broadcast_buffers={val.const})"
            )
        return None

    def optimizer(self) -> Optimizer:
        optim, where = self.arg("optim")
        beta2, _ = self.arg("adam_beta2")
        fam: str | None = None
        if optim is not None and optim.known and isinstance(optim.const, str):
            o = optim.const.lower()
            fam = "adam" if "adam" in o else "sgd" if "sgd" in o else "other"
        elif optim is not None and "default" in optim.taint:
            fam = "adam"
        if not fam:
            return Optimizer()
        family = Answer(
            fam,
            where,
            f"HF Trainer optimizer ({optim.const if optim and optim.known else 'adamw'})",
        )
        b2: Said = None
        if fam == "adam" and beta2 is not None:
            n = _num(beta2)
            if n is not None:
                b2 = Answer(n, where, f"adam_beta2={n}")
            elif "default" in beta2.taint:
                b2 = Answer(apis.ADAM_DEFAULT_BETA2, where, "default adam_beta2=0.999")
        return Optimizer(family, b2)

    def warmup(self) -> Warmup:
        ws, where = self.arg("warmup_steps")
        wr, _ = self.arg("warmup_ratio")
        steps: Said = None
        if ws is not None and _num(ws):
            n = int(_num(ws) or 0)
            steps = Answer(n, where, f"TrainingArguments(warmup_steps={n})")
        elif wr is not None and _num(wr):
            steps = Open(f"{where}: warmup given as a ratio of total steps; step count not decided")
        elif (
            ws is not None
            and wr is not None
            and ("default" in ws.taint or ws.known)
            and ("default" in wr.taint or wr.known)
        ):
            steps = Answer(0, where, "TrainingArguments without warmup")
        per_step = Answer(1.0, where, "HF Trainer steps the scheduler with the optimizer")
        return Warmup(steps, per_step)

    def trained_models(self) -> list[Obj]:
        """The ``model=`` handed to the Trainer."""
        tr = self.trainer
        m = self.obj(tr.kwargs.get("model")) if tr else None
        return [m] if m is not None else []

    def rank_conditional_resume(self) -> Said:
        for e in self.a.calls("train"):
            if e.recv is None or e.recv.kind != V.TRAINER:
                continue
            ckpt = e.kw("resume_from_checkpoint", 0)
            if ckpt is not None and V.RANK in ckpt.taint:
                return Answer(
                    True,
                    e.where,
                    f"resume_from_checkpoint differs between ranks ({e.where}): some ranks "
                    "resume the checkpoint's weights and optimizer state, the others start "
                    "fresh",
                )
        return Answer(False, "", "HF Trainer loads checkpoints on every rank")

    def adapters_before_wrap(self) -> Said:
        tr = self.trainer
        peft_after = [
            o
            for o in self.a.objects.values()
            if o.extra.get("peft") and tr is not None and o.extra["peft"] > tr.seq
        ]
        if peft_after:
            return None
        return Answer(False, self.where, "the Trainer wraps the model after the adapters exist")

    def learning_rate(self) -> tuple[Val, str, str] | None:
        val, where = self.arg("learning_rate", flow=True)
        return (val, where, "TrainingArguments(learning_rate=…)") if val is not None else None

    def per_device_batch(self) -> Said:
        val, where = self.arg("per_device_train_batch_size")
        if val is None:
            return None
        n = _num(val)
        if n is not None:
            return Answer(int(n), where, f"per_device_train_batch_size={int(n)}")
        if "default" in val.taint or "cli" in val.taint:
            return Answer(8, where, "HF default per_device_train_batch_size=8")
        return None

    def logged_loss(self) -> LoggedLoss:
        return LoggedLoss(
            Answer(False, "", "HF Trainer logs the loss averaged over ranks"),
            Answer(False, "", "HF Trainer reduces the logged loss"),
        )


def _is_model_factory(name: str) -> bool:
    return name in ("from_pretrained", "from_config", "get_peft_model") or name.endswith(
        ("Model", "ForCausalLM", "LMHeadModel", "ForSequenceClassification")
    )


# ====================================================================== Lightning
def lightning_trainer(a: Analysis) -> Obj | None:
    """The lightning.Trainer whose ``fit`` the script calls."""
    found = [o for o in a.objs(V.PL_TRAINER) if o.extra.get("fit") is not None]
    return found[0] if found else None


class LightningView(FrameworkView):
    """A ``lightning.Trainer`` fitting a LightningModule: its arguments decide accumulation,
    clipping, precision and sharding; under manual optimization the module's
    ``training_step`` runs backward, step and zero_grad itself (:mod:`.lightning`)."""

    name = "lightning"
    drives_loop = True

    def __init__(self, a: Analysis) -> None:
        super().__init__(a)
        self.trainer = lightning_trainer(a)
        self.where = self.trainer.where if self.trainer is not None else ""

    @property
    def manual(self) -> bool:
        return bool(self.trainer is not None and self.trainer.extra.get("manual"))

    def arg(self, name: str) -> tuple[Val | None, str]:
        """A lightning.Trainer argument: (its value, Lightning's default when not passed, or
        None when it comes from the command line or a config), where."""
        tr = self.trainer
        if tr is None:
            return None, ""
        val = tr.kwargs.get(name)
        if val is None:
            return Val(const=lightning.DEFAULTS[name], taint=frozenset({"default"})), tr.where
        if V.ARGDEFAULT in val.taint or V.UNBOUND in val.taint or not val.known:
            return None, tr.where
        return val, tr.where

    def accumulate_grad_batches(self) -> tuple[int | None, str]:
        val, where = self.arg("accumulate_grad_batches")
        k = _num(val) if val is not None else None
        return (int(k) if k is not None else None), where

    # ---------------------------------------------------------------- questions
    def shards_loader(self) -> Said:
        val, where = self.arg("use_distributed_sampler")
        if val is None:
            return None
        if _const(val) is not False:
            return Answer(
                True, where, "Lightning replaces the training sampler with a DistributedSampler"
            )
        tr = self.trainer
        loader = self.obj(tr.extra.get("train_loader")) if tr is not None else None
        if loader is None or loader.kind != V.LOADER:
            return Open(
                f"{where}: use_distributed_sampler=False and the training DataLoader is not read"
            )
        sampler = self.obj(loader.kwargs.get("sampler")) or self.obj(
            loader.kwargs.get("batch_sampler")
        )
        if sampler is not None and sampler.kind == V.DSAMPLER:
            return Answer(
                True, sampler.where, "the module's own DistributedSampler shards the data"
            )
        if "sampler" not in loader.kwargs and "batch_sampler" not in loader.kwargs:
            return Answer(
                False,
                loader.where,
                "use_distributed_sampler=False and a DataLoader without a sampler: every rank "
                "reads the whole dataset",
            )
        return None

    def sets_epoch(self) -> Said:
        return Answer(
            True,
            self.where,
            "Lightning's fit loop calls set_epoch on the training sampler every epoch",
        )

    def accumulation(self) -> Accumulation | Script:
        if self.manual:
            return SCRIPT  # training_step's own backward and step: read as a hand-written loop
        k, where = self.accumulate_grad_batches()
        if k is None:
            return Accumulation()
        divided: Said = None
        if k >= 2:
            divided = Answer(
                True, where, "Lightning divides the training_step loss by accumulate_grad_batches"
            )
        return Accumulation(
            Answer(k, where, f"Trainer(accumulate_grad_batches={k})"),
            divided,
            Answer(False, where, "Lightning zeroes gradients once per optimizer step"),
        )

    def sync(self) -> Sync:
        k, where = self.accumulate_grad_batches()
        if self.trainer is None or self.manual or k is None:
            return Sync()
        return Sync(
            Answer(
                k >= 2,
                where,
                "Lightning's DDP strategy skips the all-reduce on accumulating batches"
                if k >= 2
                else "no accumulation: every batch synchronises",
            ),
            Answer(True, where, "Lightning synchronises the last batch"),
        )

    def forward_through_wrapper(self) -> Said:
        if self.trainer is not None and not self.manual:
            return Answer(
                False,
                self.where,
                "Lightning calls training_step through its DDP wrapper's forward",
            )
        return None

    def trained_loss(self) -> tuple[Val, str] | Script | None:
        tr = self.trainer
        if tr is None:
            return SCRIPT
        step = (tr.extra.get("hooks") or {}).get("training_step")
        if step is None or self.manual:
            return None
        return step, tr.where

    def averages_gradients(self) -> bool:
        return self.trainer is not None

    def clipping(self) -> Clipping:
        val, where = self.arg("gradient_clip_val")
        if val is None or self.trainer is None or self.manual:
            return Clipping()
        n = _num(val)
        clips = Answer(
            bool(n),
            where,
            f"Trainer(gradient_clip_val={n:g})" if n else "Trainer without gradient_clip_val",
        )
        if not n:
            return Clipping(clips)
        return Clipping(
            clips,
            Answer(True, where, "Lightning unscales before clipping"),
            Answer(
                False,
                where,
                "Lightning clips before the optimizer step, after the synchronised backward",
            ),
        )

    def precision(self) -> Said:
        val, where = self.arg("precision")
        value = lightning.precision(val.const) if val is not None and val.known else None
        if value is None:
            return Open(f"{where}: Trainer(precision=…) comes from the command line; not decided")
        return Answer(value, where, f"Trainer(precision={val.const!r})")  # type: ignore[union-attr]


# ====================================================================== accelerate
class AccelerateView(FrameworkView):
    """An accelerate ``Accelerator`` whose ``prepare`` the script calls: the loop is the
    script's own; the Accelerator shards the loaders, synchronises the gradients and, by its
    ``mixed_precision``, autocasts and scales the loss."""

    name = "accelerate"

    def __init__(self, a: Analysis) -> None:
        super().__init__(a)
        self.accelerator = a.objs(V.ACCELERATOR)[0]
        self.where = self.accelerator.where

    def note(self) -> str | None:
        return (
            f"{self.where}: accelerate script: accelerator.prepare() shards the data and "
            "accelerator.accumulate() handles gradient sync"
        )

    def runs_loop(self) -> Said:
        # kb/facts.yaml: your own loop on accelerate is hand-written; accelerate wraps the
        # model, optimizer and loader, the loop's forward, loss and step are the user's
        return Answer(True, self.where, "your own training loop on accelerate")

    def precision(self) -> Said:
        mp = self.accelerator.kwargs.get("mixed_precision")
        if mp is not None and mp.known:
            value = {"fp16": "fp16_amp", "bf16": "bf16_amp", "no": "fp32"}.get(str(mp.const))
            if value:
                return Answer(value, self.where, f"Accelerator(mixed_precision={mp.const!r})")
        elif mp is None:
            return Open(
                f"{self.where}: mixed precision comes from the accelerate config; not decided"
            )
        return None  # the accelerate config (or an unreadable flag) decides

    def scales_loss(self) -> bool:
        return True  # accelerate scales fp16 losses itself when its mixed precision asks for it


def build(a: Analysis) -> FrameworkView | None:
    """The view of the framework that drives the job (``Analysis.framework``), or None for a
    hand-written loop."""
    views: dict[str | None, type[FrameworkView]] = {
        "hf_trainer": HFTrainerView,
        "lightning": LightningView,
        "accelerate": AccelerateView,
    }
    cls = views.get(a.framework)
    return cls(a) if cls is not None else None


def _const(val: Val | None) -> object | None:
    return val.const if val is not None and val.known else None


def _num(val: Val | None) -> float | None:
    c = _const(val)
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        return None
    return float(c)
