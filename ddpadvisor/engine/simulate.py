"""A simulated user who answers truthfully, to measure how fast questions find a cause.

The user's job has one fault. For every askable fact their true answer is the class that the
fault makes most likely (ties and unlinked facts: the healthy mode). The loop asks the question
the engine proposes (asked facts only) until the true cause ranks first and the engine would
stop, or the questions run out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpadvisor.engine.diagnose import SETTLED, Engine, _how
from ddpadvisor.engine.infer import expected_gain, posterior


@dataclass
class Session:
    cause: str
    asked: list[str]
    first_at: int | None  # questions asked when the true cause first ranked first
    settled_at: int | None  # questions asked when the top posterior reached SETTLED


def true_answers(engine: Engine, cause: str) -> dict[str, str]:
    model = engine.model
    ci = model.causes.index(cause)
    answers = {}
    for fid, table in model.facts.items():
        dist = table.likelihood.get(ci, table.healthy)
        answers[fid] = table.classes[max(range(len(dist)), key=lambda k: dist[k])]
    return answers


def simulate(engine: Engine, cause: str, max_questions: int = 25) -> Session:
    model = engine.model
    truth = true_answers(engine, cause)
    askable = [f.id for f in engine.kb.facts.values() if _how(f.sources) == "ask"]
    observed: dict[str, str] = {}
    asked: list[str] = []
    first_at = settled_at = None
    for n in range(max_questions + 1):
        post = posterior(model, observed)
        top = post.causes[post.ranking()[0]]
        if top == cause and first_at is None:
            first_at = n
        if top == cause and post.prob(top) >= SETTLED and settled_at is None:
            settled_at = n
        if settled_at is not None or n == max_questions:
            break
        gains = [
            (expected_gain(model, post, f) / engine.kb.facts[f].cost, f)
            for f in askable
            if f not in observed
        ]
        gains = [g for g in gains if g[0] > 1e-9]
        if not gains:
            break
        _, best = max(gains)
        observed[best] = truth[best]
        asked.append(best)
    return Session(cause, asked, first_at, settled_at)
