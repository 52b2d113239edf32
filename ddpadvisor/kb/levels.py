"""Numbers behind the qualitative levels that KB authors write."""

from __future__ import annotations

STRENGTH: dict[str, float] = {
    "certain": 0.99,
    "strong": 0.9,
    "moderate": 0.6,
    "weak": 0.3,
    "slight": 0.1,
}

PRIOR: dict[str, float] = {
    "common": 0.08,
    "uncommon": 0.03,
    "rare": 0.01,
    "very-rare": 0.003,
}

# Prior of the catch-all "no catalogued cause" node: higher than any single cause, so that a
# job with no evidence against it ranks healthy first.
CATCH_ALL_PRIOR = 0.25


def strength(value: str | float) -> float:
    return STRENGTH[value] if isinstance(value, str) else float(value)


def prior(value: str | float) -> float:
    return PRIOR[value] if isinstance(value, str) else float(value)
