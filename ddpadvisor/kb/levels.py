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


# A user's description that reads like a cause's account (kb/resemblance.py: a cosine in
# [0, 1]) is evidence for it: ln LR = RESEMBLANCE_WEIGHT x (score - RESEMBLANCE_FLOOR) above the
# floor, nothing below it. Unrelated text shares a few common words with many accounts and stays
# under the floor; a description of the mechanism or of its telltale symptoms scores 0.2-0.6
# (LR 3 to 700). On the interview corpus's tuned part the figures were flat (within a case or two)
# over weights 10-20 and floors 0.05-0.16 (bench/interview.py); these sit inside that plateau.
RESEMBLANCE_FLOOR = 0.12
RESEMBLANCE_WEIGHT = 15.0
