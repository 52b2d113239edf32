"""A simulated user who answers truthfully, to measure how fast questions find a cause.

The user's job has one fault. For every askable fact their true answer is the class that the
fault makes most likely (ties and unlinked facts: the healthy mode). The loop asks the question
the engine proposes (its best "ask" next step, preconditions included) until the true cause
ranks first and the engine would stop, or the questions run out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpadvisor.engine.diagnose import SETTLED, Engine
from ddpadvisor.engine.infer import posterior
from ddpadvisor.engine.questions import next_steps
from ddpadvisor.kb.schema import Fact
from ddpadvisor.observation import Observation


@dataclass
class Session:
    cause: str
    asked: list[str]
    first_at: int | None  # questions asked when the true cause first ranked first
    settled_at: int | None  # questions asked when the top posterior reached SETTLED


def true_answers(engine: Engine, cause: str) -> dict[str, str]:
    model = engine.model
    # a cause with modes answers as its likeliest mode a priori
    ci = max(model.members[model.public_causes.index(cause)], key=model.priors.__getitem__)
    answers = {}
    for fid, table in model.facts.items():
        dist = table.likelihood.get(ci, table.healthy)
        answers[fid] = table.classes[max(range(len(dist)), key=lambda k: dist[k])]
    return answers


def representative(fact: Fact, cls: str) -> bool | int | float | str:
    """A value of the class, for judging preconditions (``ask_if``) on a simulated answer."""
    if fact.type == "bool":
        return cls == "true"
    if fact.type in ("int", "float") and fact.bins:
        edges = fact.bins
        if cls.startswith(">="):
            x = float(cls[2:])
        elif cls.startswith("<"):
            x = float(cls[1:]) - 1
        else:
            x = float(cls.split("..")[0])
        x = max(x, 0.0) if edges[0] > 0 else x
        return int(x) if fact.type == "int" else x
    return cls


def simulate(engine: Engine, cause: str, max_questions: int = 25) -> Session:
    model = engine.model
    kb = engine.kb
    truth = true_answers(engine, cause)
    observed: dict[str, str] = {}
    winners: dict[str, Observation] = {}
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
        asks = [st for st in next_steps(kb, model, post.compiled(), winners) if st.kind == "ask"]
        if not asks:
            break
        best = asks[0].facts[0]
        observed[best] = truth[best]
        value = representative(kb.facts[best], truth[best])
        winners[best] = Observation(fact=best, value=value, source="answer")
        asked.append(best)
    return Session(cause, asked, first_at, settled_at)
