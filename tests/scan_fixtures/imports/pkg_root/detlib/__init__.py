"""A package whose __init__ re-exports names from its sub-modules."""
from .engine import evaluate, train_one_epoch

__all__ = ["evaluate", "train_one_epoch"]
from .export import export_onnx  # noqa: F401  (never used by training: not read)
