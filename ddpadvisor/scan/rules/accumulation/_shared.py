"""Helpers that several rules of accumulation share."""

from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.library import hf_trainer, lightning
from ddpadvisor.scan.rules.base import RuleContext, num
from ddpadvisor.scan.values import Val


def _trainer_loss(rc: RuleContext) -> hf_trainer.Decided | None:
    """What a Trainer subclass's own compute_loss does to accumulation scaling."""
    info = rc._class_of(rc.trainer())
    if info is None:
        return None
    model = rc.obj(rc.trainer_model())
    hf_model = any(
        e.name.startswith(("transformers.", "peft.")) and _is_model_factory(apis.last(e.name))
        for e in rc.a.calls()
    )
    labels = any(hf_trainer.script_labels(m.tree) for m in rc.walk.sources.modules.values())
    labels = labels or hf_trainer.script_labels(rc.walk.sources.main.tree)
    return hf_trainer.loss_scaled_for_accumulation(
        info, hf_trainer.model_takes_loss_kwargs(rc._class_of(model), hf_model), labels
    )


def _is_model_factory(name: str) -> bool:
    return name in ("from_pretrained", "from_config", "get_peft_model") or name.endswith(
        ("Model", "ForCausalLM", "LMHeadModel", "ForSequenceClassification")
    )


def _lightning_k(rc: RuleContext) -> tuple[int | None, str]:
    val, where = rc.pl_arg("accumulate_grad_batches", lightning.DEFAULTS["accumulate_grad_batches"])
    k = num(val) if val is not None else None
    return (int(k) if k is not None else None), where


def _trained_loss(rc: RuleContext) -> tuple[Val, str] | None:
    """The loss that goes to backward (a LightningModule's training_step return under
    automatic optimization) and where, when it comes from the model's forward."""
    a = rc.a
    b = a.main_backward
    tr = rc.pl_trainer() if rc.pl else None
    if tr is not None:
        step = (tr.extra.get("hooks") or {}).get("training_step")
        if step is None or tr.extra.get("manual"):
            return None
        loss, where = step, tr.where
    elif b is None:
        return None
    else:
        loss, where = a.loss_of(b), b.where
    return (loss, where) if V.FWD in loss.taint else None


def _trainer_world_factor(rc: RuleContext, fact: str, op: str) -> None:
    """The world size in the loss of an HF Trainer: the Trainer's own compute_loss has none,
    a subclass's override may (library/hf_trainer.py). Where the script builds several
    Trainers (one per stage or option), the fact holds only when all of them agree."""
    infos = [rc._class_of(o) for o in rc.a.objs(V.TRAINER)]
    verdicts: list[tuple[str, hf_trainer.Decided] | None] = [
        hf_trainer.loss_world_factor(info) if info is not None else None for info in infos
    ]
    mine = [v[1] for v in verdicts if v is not None and v[0] == op]
    if not mine:
        rc.emit(fact, False, "", "HF Trainer computes the loss")
        return
    if len(mine) < len(verdicts):
        rc.warn(
            f"{mine[0].where}: {mine[0].why}, but only {len(mine)} of the {len(verdicts)} "
            f"Trainers the script builds do so; {fact} depends on which one runs; not decided"
        )
        return
    rc.emit(fact, True, mine[0].where, mine[0].why)
