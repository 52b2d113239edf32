"""Hooks into torch: backward() entry points and reads of the loss (item/tolist/float)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import runtime as rt
from ..runtime import _ORIG, _busy, _compiling, _internal, _wrap


def install() -> None:
    def run(orig: Any, loss: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        a = rt.AGENT
        if a is None or _busy() or _compiling() or getattr(_internal, "in_backward", False):
            return orig(*args, **kwargs)
        b = a.safe("backward", a.before_backward, loss)
        _internal.in_backward = True
        try:
            return orig(*args, **kwargs)
        finally:
            _internal.in_backward = False
            if b is not None:
                a.safe("backward", a.after_backward, b)

    def make_tensor_backward(orig: Any) -> Any:
        def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
            return run(orig, self, (self, *args), kwargs)

        return backward

    def make_autograd_backward(orig: Any) -> Any:
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            loss = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            return run(orig, loss, (tensors, *args), kwargs)

        return backward

    _wrap(torch.Tensor, "backward", "tensor_backward", make_tensor_backward)
    _wrap(torch.autograd, "backward", "autograd_backward", make_autograd_backward)

    def make_read(key: str) -> Callable[[Any], Any]:
        def make(orig: Any) -> Any:
            def read(self: Any, *args: Any, **kwargs: Any) -> Any:
                a = rt.AGENT
                if a is not None and a.loss_ptrs and not _busy():
                    try:
                        if self.numel() == 1 and self.data_ptr() in a.loss_ptrs:
                            a.window.loss_reads += 1
                    except Exception:
                        pass
                return orig(self, *args, **kwargs)

            return read

        return make

    _ORIG["item"] = torch.Tensor.item
    _ORIG["tolist"] = torch.Tensor.tolist
    for name in ("item", "tolist", "__float__"):
        _wrap(torch.Tensor, name, f"read_{name}", make_read(name))


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("autograd")
