"""Gradient accumulation, no_sync, the forward route through DDP and the loss's normalisation
(kb/causes/accumulation.yaml)."""
