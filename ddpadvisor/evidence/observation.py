"""The one currency between evidence sources and the engine."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

ObsSource = Literal["answer", "set", "script", "probe", "trace"]

# Measured beats scanned beats asked (SPEC: "the measured one wins").
PRECEDENCE: dict[str, int] = {"answer": 0, "set": 1, "script": 2, "probe": 3, "trace": 3}


class Observation(BaseModel):
    """A fact's value as one source saw it.

    ``where`` locates it (``train.py:42``, ``rank 1 step 37``, ``answers.yaml:3``) and
    ``detail`` says in words what was seen ("replicas diverged at step 37: fc.weight (rank 1)").
    """

    model_config = ConfigDict(frozen=True)

    fact: str
    value: bool | int | float | str
    source: ObsSource
    where: str | None = None
    detail: str | None = None
