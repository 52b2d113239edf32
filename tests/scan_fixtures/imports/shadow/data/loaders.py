"""A module of a namespace package (data/ has no __init__.py)."""
import torch
from torch.utils.data import TensorDataset


def make_dataset():
    return TensorDataset(torch.randn(64, 16), torch.randn(64, 16))
