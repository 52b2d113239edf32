"""A library in the style of transformers/datasets: it looks torch up before it imports it,
and imports it only when first used."""

import importlib.util
import os
from pathlib import Path

TORCH_AVAILABLE = importlib.util.find_spec("torch") is not None  # a lookup that loads nothing


def torch():  # type: ignore[no-untyped-def]
    import torch as _torch  # lazily, at first use

    return _torch


class Squares:
    """A map-style dataset that notes, once per DataLoader worker, whether the agent is loaded."""

    def __init__(self, n: int, out: str) -> None:
        self.n = n
        self.out = out
        self.noted = False

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        t = torch()
        if not self.noted and t.utils.data.get_worker_info() is not None:
            self.noted = True
            flag = bool(getattr(t, "_ddpadvisor_agent", False))
            Path(self.out, f"worker{os.getpid()}.txt").write_text(str(flag))
        x = t.full((4,), float(i) / self.n)
        return x, x.sum(0, keepdim=True)
