from .detector import build_model  # noqa: F401
