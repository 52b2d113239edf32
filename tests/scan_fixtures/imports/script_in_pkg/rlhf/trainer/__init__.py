from .pair import PairTrainer

__all__ = ["PairTrainer"]
