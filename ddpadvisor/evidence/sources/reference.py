"""``--reference-log FILE``: the log of the single-GPU (or an earlier, good) run, compared with
the logs given to ``--attach``: steps per epoch against the world size, the loss at the same
epochs (or steps) — off by a constant factor, or worse late in the run —, and the peak
learning rate against the world size. The reference's own curve settles nothing about the
run being diagnosed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpadvisor.evidence.sources.base import Flag, Source

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered


def read_all(kb: KnowledgeBase, values: Sequence[str | Path], request: Any) -> Gathered:
    from ddpadvisor.evidence.files import facts
    from ddpadvisor.evidence.files.found import Read
    from ddpadvisor.evidence.sources.attach import read_one

    attached = [read_one(v) for v in getattr(request, "attach", [])]
    runs = [c for c in (facts.main_curve(r) for r in attached) if c is not None]
    world = next((r.world_size for r in attached if r.world_size), None)
    accum = next(
        (f.value for r in attached for f in r.findings if f.fact == "grad_accum_steps"), None
    )
    reads: list[Read] = []
    for value in values:
        ref_read = read_one(value)
        ref = facts.main_curve(ref_read)
        name = Path(str(value)).name
        note = Read("reference", warnings=[w for w in ref_read.warnings])
        if ref is None:
            note.warnings.append(f"{value}: no loss curve in the reference log; nothing compared")
        elif not runs:
            note.warnings.append(
                f"{value}: a reference log needs the run's own log beside it (--attach FILE)"
            )
        else:
            note.extend(facts.compare(runs[0], ref, world, accum, name))
        reads.append(note)
    return facts.to_gathered(kb, reads)


def read(kb: KnowledgeBase, value: str | Path) -> Gathered:
    return read_all(kb, [value], None)


SOURCE = Source(
    name="reference",
    field="reference_logs",
    observes="log",
    precedence=3,
    flags=(
        Flag(
            "--reference-log",
            "FILE",
            "the log of the single-GPU (or an earlier, good) run, compared with --attach's",
            path=False,
        ),
    ),
    read=read,
    read_all=read_all,
    summary="an earlier good run's log, compared with the attached one",
)
