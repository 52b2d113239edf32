"""Turn a ``ddpadvisor trace`` folder into measured facts.

Each rank wrote ``rank<R>.jsonl`` (see ``ddpadvisor/tracing/agent``); the launcher wrote
``meta.json`` (absent when the agent ran under the user's own torchrun/srun). Everything that
needs more than one rank is compared here, offline: replicas are compared exactly (DDP keeps
them bit-identical) and only at optimizer steps that every rank finished; batches, losses,
clip norms and GradScaler state step by step; sampler indices epoch by epoch.

A fact is emitted only when the trace measured it; everything else stays unobserved. Each
observation says where (``rank 1 step 37``) and what was seen, in a sentence.

Torch-free: reading a trace needs only the standard library.

Modules: ``load`` (reading and validating the files), ``context`` (what every topic sees),
one module per topic (setup, deepspeed, replicas, sync, accumulation, clipping, schedule, data, rng,
losses) and ``common`` helpers."""

from __future__ import annotations

from pathlib import Path

from ddpadvisor.evidence.trace.accumulation import AccumulationReader
from ddpadvisor.evidence.trace.clipping import ClippingReader
from ddpadvisor.evidence.trace.common import _ranks_text
from ddpadvisor.evidence.trace.context import _Facts
from ddpadvisor.evidence.trace.data import DataReader
from ddpadvisor.evidence.trace.deepspeed import DeepSpeedReader
from ddpadvisor.evidence.trace.load import RankTrace, load_trace, traced_script
from ddpadvisor.evidence.trace.losses import LossesReader
from ddpadvisor.evidence.trace.replicas import ReplicasReader
from ddpadvisor.evidence.trace.rng import RngReader
from ddpadvisor.evidence.trace.schedule import ScheduleReader
from ddpadvisor.evidence.trace.setup import SetupReader
from ddpadvisor.evidence.trace.sync import SyncReader
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.observation import Gathered

__all__ = ["RankTrace", "load_trace", "read_trace", "traced_script"]


class _Reader(
    SetupReader,
    DeepSpeedReader,
    ReplicasReader,
    SyncReader,
    AccumulationReader,
    ClippingReader,
    ScheduleReader,
    DataReader,
    RngReader,
    LossesReader,
):
    """Every topic reader over one trace."""


def read_trace(kb: KnowledgeBase, folder: Path) -> Gathered:
    """Measured facts from a trace folder; a failed run sets ``failed`` but keeps the facts."""
    ranks, meta, warnings = load_trace(Path(folder))
    facts = _Facts(kb)
    failed = False
    if meta is not None and meta.get("status") == "failed":
        failed = True
        failure = meta.get("failure") or {}
        warnings.append(f"trace run failed: {failure.get('message', 'unknown reason')}")
    for warning in (meta or {}).get("warnings", []) or []:
        warnings.append(f"trace run: {warning}")
    for t in ranks:
        exc = t.first("exception")
        if exc is not None and meta is None:
            failed = True
            warnings.append(
                f"rank {t.rank} raised {exc.get('type')}: {exc.get('msg')} at {exc.get('where')}"
            )
        for err in t.kind("agent_error"):
            warnings.append(
                f"rank {t.rank}: the trace agent switched off its '{err.get('part')}' "
                f"recording after an error: {err.get('error')} ({err.get('at', '?')})"
            )
    ranks = [t for t in ranks if t.records]
    if not ranks:
        warnings.append(
            f"{folder}: no rank recorded anything (did the script initialise torch.distributed?)"
        )
        return Gathered([], warnings, failed)
    if not any(t.steps for t in ranks):
        # Nothing the job did in training was recorded: no reading can call it healthy.
        failed = True
        warnings.append(
            f"{folder}: the trace recorded no optimizer step on any rank (the job ended or was "
            "stopped before training); nothing in it can show the run healthy"
        )
    worlds = {int(t.start.get("world") or 1) for t in ranks}
    world = max(worlds)
    if len(worlds) > 1:
        warnings.append(
            f"the rank files disagree on the world size ({', '.join(map(str, sorted(worlds)))}); "
            f"using {world}"
        )
    present = {t.rank for t in ranks}
    beyond = sorted(r for r in present if r >= world)
    if beyond:
        warnings.append(f"{_ranks_text(beyond)} lie outside the world size {world}")
    missing_count = world - len(present) + len(beyond)
    if missing_count > 0:
        missing = [r for r in range(min(world, len(present) + 8)) if r not in present][:8]
        shown = _ranks_text(missing) + (
            f" and {missing_count - 8} more" if missing_count > 8 else ""
        )
        warnings.append(f"{shown} wrote no trace; comparing the {len(present)} that did")
    if meta is None or meta.get("status") != "failed":
        for t in ranks:
            ended = any(r.get("k") in ("end", "exception", "final", "destroy") for r in t.records)
            if not ended:
                last = max(t.steps) if t.steps else 0
                warnings.append(
                    f"{t.path}: rank {t.rank}'s trace stops at step {last} without an end record "
                    "(the run was interrupted or is still running)"
                )
    ctx = _Reader(ranks, world, facts)
    for part in (
        ctx.setup,
        ctx.deepspeed_engine,
        ctx.replicas,
        ctx.sync,
        ctx.accumulation,
        ctx.clipping,
        ctx.scaler,
        ctx.scheduler,
        ctx.data,
        ctx.rng,
        ctx.losses,
        ctx.logging,
    ):
        try:
            part()
        except (
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            AttributeError,
            ArithmeticError,
        ) as exc:
            # The records passed the format check but are not what a real agent writes.
            warnings.append(
                f"trace: the {part.__name__} findings were not read: inconsistent records "
                f"({type(exc).__name__}: {str(exc)[:80]})"
            )
    return Gathered(list(facts.out.values()), warnings + facts.warnings, failed)
