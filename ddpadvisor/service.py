"""The composition root: load the engine and diagnose given sources.

The CLI, the TUI, ``trace --verify`` and ``kb test`` all come through here, so nothing imports
``cli.py`` and every entry point loads the knowledge base (and its cache) the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddpadvisor.engine.diagnose import Engine
    from ddpadvisor.evidence.gather import Sources
    from ddpadvisor.i18n import Lang
    from ddpadvisor.observation import Gathered
    from ddpadvisor.report.models import Diagnosis


def load_engine(kb_dirs: Sequence[Path] = ()) -> Engine:
    """The bundled KB, the user's config folder and ``kb_dirs``, validated and compiled."""
    from ddpadvisor.engine.cache import load_cached
    from ddpadvisor.engine.diagnose import Engine
    from ddpadvisor.kb.files import default_dirs

    kb, model = load_cached(default_dirs(list(kb_dirs)))
    kb.raise_first_problem()
    return Engine(kb, model)


def gather_sources(engine: Engine, sources: Sources) -> Gathered:
    from ddpadvisor.evidence.gather import gather

    return gather(engine.kb, sources)


def diagnose(
    engine: Engine,
    sources: Sources,
    *,
    gpu_available: bool | None = None,
    top: int | None = None,
    lang: Lang = "en",
) -> tuple[Diagnosis, bool]:
    """The diagnosis of everything ``sources`` names, and whether a probe or trace run failed."""
    from ddpadvisor.report import present

    got = gather_sources(engine, sources)
    diagnosis = present.diagnose(
        engine,
        got.observations,
        warnings=got.warnings,
        gpu_available=gpu_available,
        top=top,
        declined=got.declined,
        verified=got.verified,
        resemblance=got.resemblance,
        lang=lang,
        run_failed=got.failed,
    )
    if got.failed:
        diagnosis = diagnosis.model_copy(update={"run_failed": True})
    return diagnosis, got.failed
