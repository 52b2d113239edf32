"""Optimiser, learning-rate scaling and schedule (kb/causes/optimisation.yaml)."""
