"""Helpers that several rules of accumulation share."""

from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.values import Val


def _trained_loss(rc: RuleContext) -> tuple[Val, str] | None:
    """The loss that goes to backward (a LightningModule's training_step return under
    automatic optimization) and where, when it comes from the model's forward."""
    a = rc.a
    b = a.main_backward
    fw = rc.framework
    said = fw.trained_loss() if fw is not None else SCRIPT
    if said is None:
        return None
    if said is not SCRIPT:
        assert isinstance(said, tuple)
        loss, where = said
    elif b is None:
        return None
    else:
        loss, where = a.loss_of(b), b.where
    return (loss, where) if V.FWD in loss.taint else None
