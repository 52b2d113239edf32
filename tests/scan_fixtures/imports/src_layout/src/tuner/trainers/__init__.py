from .base import BaseRecipe
from .sft import SFTRecipe

__all__ = ["BaseRecipe", "SFTRecipe"]
