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


# A user's description that reads like a cause's account is evidence for it (kb/resemblance.py).
# The score is a cosine in [0, 1]; a long description shares a few words with many accounts,
# so what counts is how far a cause's score stands above the other causes' (z, in their standard
# deviations): ln LR = RESEMBLANCE_SLOPE x (z - RESEMBLANCE_STANDOUT), for a score at the floor or
# above. Unrelated text stays under the floor; a description of the mechanism or of its telltale
# symptoms stands 4-12 deviations out (LR 5 to 3000, before the cap below). On the interview
# corpus's tuned part the figures were flat (within a case or two) over slopes 1-2.25 and
# standouts 2-3 (bench/interview.py); these sit inside that plateau, on its cautious side. The
# floor is the higher of the two tried: at 0.10, one-line generic complaints ("loss oscillates on
# 8 GPUs") began to count.
RESEMBLANCE_FLOOR = 0.12
RESEMBLANCE_STANDOUT = 3.0
RESEMBLANCE_SLOPE = 1.5
# Words are a hint, never a verdict: however closely a text reads like a cause, it moves the
# odds at most this much (ln 2.5 = x12), and words alone never settle a cause (the engine checks
# the lead without them) nor count when they ask ("is it torch.compile?", kb/resemblance.py).
# The cap was ln 6 (x400), fitted on a corpus whose texts were written by people who had read
# the resolutions. On the blind bench's tuned part (bench/interview_blind.py: posts and answers
# written from the opening post alone) caps of ln 1.1 / 2 / 2.5 / 3 / 6 gave catalogued top-1
# 10 / 11 / 15 / 15 / 15 and top-3 20 / 21 / 22 / 22 / 22 of 43: the reporter's own words do
# carry signal, up to about ln 2.5 and no further. This is the low end of that plateau.
RESEMBLANCE_MAX = 2.5
