"""Per-rank JSONL writer: one record per line, device values copied to the host in batches."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any

import torch

from . import runtime as rt
from .runtime import INTERNAL, PENDING_LIMIT


class Writer:
    """Per-rank JSONL file: one record per line, flushed per record.

    Records may hold tensors. Records whose tensors are all on the CPU are written at once;
    records holding device tensors wait for :meth:`flush`, which copies all their values to the
    host in one transfer per device.
    """

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir
        self.pid = os.getpid()
        self.fh: Any = None
        self.pending: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def mine(self) -> bool:  # a forked DataLoader worker inherits the agent but must not write
        return os.getpid() == self.pid

    def open(self, rank: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.dir / f"rank{rank}.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def add(self, rec: dict[str, Any]) -> None:
        if not self.mine:
            return
        with self.lock:
            if self.fh is None and len(self.pending) >= PENDING_LIMIT:
                return  # a process that never joins a process group never writes: keep it small
            self.pending.append(rec)
            if self.fh is not None and not _on_device(rec):
                self._write_pending()

    def flush(self) -> None:
        if not self.mine:
            return
        with self.lock:
            if self.fh is not None:
                self._write_pending()

    def _write_pending(self) -> None:
        if not self.pending:
            return
        records, self.pending = self.pending, []
        with INTERNAL:
            _materialise(records)
        for rec in records:
            self.fh.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
            self.fh.flush()


def _walk_tensors(obj: Any, out: list[tuple[Any, Any, Any]]) -> None:
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for key, value in items:
        if isinstance(value, (dict, list)):
            _walk_tensors(value, out)
        elif torch is not None and isinstance(value, torch.Tensor):
            out.append((obj, key, value))


def _on_device(rec: dict[str, Any]) -> bool:
    found: list[tuple[Any, Any, Any]] = []
    _walk_tensors(rec, found)
    return any(t.device.type != "cpu" for _, _, t in found)


def _materialise(records: list[dict[str, Any]]) -> None:
    """Replace every tensor in the records by plain numbers, one host copy per device."""
    found: list[tuple[Any, Any, Any]] = []
    for rec in records:
        _walk_tensors(rec, found)
    found = [(holder, key, rt._local(t)) for holder, key, t in found]  # DTensors: this rank's part
    by_device: dict[str, list[tuple[Any, Any, Any]]] = {}
    for slot in found:
        by_device.setdefault(str(slot[2].device), []).append(slot)
    for device, slots in by_device.items():
        if device == "cpu":
            for holder, key, t in slots:
                holder[key] = rt.tolist(t.detach())
            continue
        flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for _, _, t in slots])
        values = rt.tolist(flat.cpu())
        pos = 0
        for holder, key, t in slots:
            n = t.numel()
            chunk = values[pos : pos + n]
            pos += n
            if t.dim() == 0:
                holder[key] = chunk[0]
            else:
                holder[key] = _reshape(chunk, list(t.shape))
            if t.dtype in (torch.int64, torch.int32, torch.bool):
                holder[key] = _as_int(holder[key])


def _reshape(flat: list[Any], shape: list[int]) -> Any:
    if len(shape) <= 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_reshape(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def _as_int(x: Any) -> Any:
    if isinstance(x, list):
        return [_as_int(v) for v in x]
    return int(x) if isinstance(x, float) and math.isfinite(x) else x
