"""Shared constants of a small LM project (a helper module for the loss_shape fixtures)."""

import torch

IGNORE_INDEX = -100
PAD_TOKEN = "[PAD]"


def pad_labels(labels, length):
    """The fine-tuning collator's label padding."""
    out = torch.full((len(labels), length), IGNORE_INDEX)
    for i, row in enumerate(labels):
        out[i, : len(row)] = torch.tensor(row)
    return out
