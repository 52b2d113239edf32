"""SPEC quality bars that depend only on the bundled KB (no torch, no processes)."""

from __future__ import annotations

import statistics

from ddpadvisor.engine.simulate import simulate


def test_simulated_user_finds_the_cause_within_six_questions(engine) -> None:  # type: ignore[no-untyped-def]
    sessions = [simulate(engine, cause) for cause in sorted(engine.kb.causes)]
    firsts = [s.first_at if s.first_at is not None else 99 for s in sessions]
    table = {s.cause: s.first_at for s in sessions}
    assert statistics.median(firsts) <= 6, table


def test_no_evidence_ranks_the_catch_all_first(engine) -> None:  # type: ignore[no-untyped-def]
    post = engine.posterior([])
    assert post.causes[post.ranking()[0]] == "other"
