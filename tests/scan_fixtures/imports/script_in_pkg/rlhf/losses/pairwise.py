"""A module of a namespace package (its folder has no __init__.py)."""
import torch.nn.functional as F


def pair_loss(chosen, rejected):
    return -F.logsigmoid(chosen - rejected).mean()
