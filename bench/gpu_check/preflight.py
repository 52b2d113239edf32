"""Preflight of the GPU check: versions, the GPU, and an import check of the trace agent.

    python3 bench/gpu_check/preflight.py OUT.json

Writes one JSON document: python / torch / CUDA / cuDNN / NCCL versions, which distributed
backends this torch has, the GPU (name, capability, memory, bf16), and whether the trace agent
package (ddpadvisor/tracing/agent) imports with torch alone: it must pull in neither pydantic
nor any ``ddpadvisor`` module, because the GPU machine has no pydantic. Exit 0 when the agent
check passed, 1 otherwise. Standard library and torch only.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "ddpadvisor", "tracing", "agent")
FORBIDDEN = ("pydantic", "textual", "ddpadvisor", "yaml", "networkx")


def _try(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"


def torch_info() -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": _try(lambda: torch.backends.cudnn.version()),
        "cuda_available": torch.cuda.is_available(),
        "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "nccl": None,
        "dist_available": dist.is_available(),
        "nccl_available": _try(dist.is_nccl_available),
        "gloo_available": _try(dist.is_gloo_available),
        "gpu": None,
    }
    if torch.cuda.is_available():
        info["nccl"] = _try(lambda: ".".join(map(str, torch.cuda.nccl.version())))
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = {
            "name": props.name,
            "capability": list(torch.cuda.get_device_capability(0)),
            "memory_gib": round(props.total_memory / 2**30, 1),
            "bf16_supported": _try(lambda: torch.cuda.is_bf16_supported()),
            "bf16_native": _try(lambda: torch.cuda.is_bf16_supported(including_emulation=False)),
            "arch_list": _try(torch.cuda.get_arch_list),
        }
    return info


def agent_check() -> dict[str, Any]:
    """Import every part of the agent package with torch loaded, as the job does."""
    import importlib

    import torch  # noqa: F401  (the agent is installed after torch; its imports do not count)

    before = set(sys.modules)
    sys.path.insert(0, AGENT_DIR)
    try:
        for name in ("ddpadvisor_trace_agent", "ddpadvisor_trace_agent.format"):
            importlib.import_module(name)
        for name in ("core", "runtime", "writer", "hooks"):
            importlib.import_module(f"ddpadvisor_trace_agent.{name}")
        error = None
    except Exception:
        error = traceback.format_exc()
    finally:
        sys.path.remove(AGENT_DIR)
    loaded = sorted(set(sys.modules) - before)
    bad = sorted({m for m in loaded if m.split(".")[0] in FORBIDDEN})
    return {
        "agent_dir": AGENT_DIR,
        "imports_ok": error is None,
        "error": error,
        "forbidden_modules": bad,
        "ok": error is None and not bad,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: preflight.py OUT.json\n")
        return 2
    started = time.perf_counter()
    report: dict[str, Any] = {
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "env": {
            k: v
            for k, v in os.environ.items()
            if k.startswith(("NCCL_", "TORCH_", "CUDA_", "GLOO_")) or k in ("PYTHONPATH",)
        },
    }
    report["versions"] = _try(torch_info)
    report["agent"] = agent_check()
    report["seconds"] = round(time.perf_counter() - started, 3)
    with open(argv[0], "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1, default=str)
    versions = report["versions"] if isinstance(report["versions"], dict) else {}
    gpu = versions.get("gpu") or {}
    print(
        f"torch {versions.get('torch')} cuda {versions.get('cuda')} nccl {versions.get('nccl')} "
        f"gpu {gpu.get('name')} agent_ok {report['agent']['ok']}"
    )
    return 0 if report["agent"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
