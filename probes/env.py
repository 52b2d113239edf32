"""Probe `env`: versions, backend, GPU and bf16 support, NCCL / torch.distributed settings.

Run alone: ``torchrun --nproc_per_node N env.py --out DIR`` (stdlib + torch only).
Each rank records what it sees, then all ranks compare, so a node with another torch, NCCL,
GPU or environment variable stands out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import socket
import sys
import types
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _harness.py beside it
import _harness

sys.path.pop(0)

NAME = "env"

# Variables whose values describe how collectives and kernels run.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCH_DIST_", "GLOO_", "CUDA_")
ENV_NAMES = (
    "TORCH_CPP_LOG_LEVEL",
    "TORCH_SHOW_CPP_STACKTRACES",
    "TORCH_FR_BUFFER_SIZE",
    "NVIDIA_TF32_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
    "PYTORCH_CUDA_ALLOC_CONF",
    "OMP_NUM_THREADS",
)
# NCCL settings that force an algorithm, protocol or transport, or change buffers and channels.
# NCCL's documentation files most of them under "debugging": not meant to stay set in production.
NCCL_OVERRIDES = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_NTHREADS",
    "NCCL_BUFFSIZE",
    "NCCL_LL_THRESHOLD",
    "NCCL_TREE_THRESHOLD",
    "NCCL_LL128_BUFFSIZE",
    "NCCL_LL128_NTHREADS",
    "NCCL_CUMEM_ENABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_COLLNET_ENABLE",
    "NCCL_CROSS_NIC",
    "NCCL_CHECKS_DISABLE",
    "NCCL_LAUNCH_MODE",
)
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def add_args(parser: argparse.ArgumentParser) -> None:
    """The env probe has no options of its own."""


def relevant_env(environ: dict[str, str]) -> dict[str, str]:
    return {
        k: v
        for k, v in sorted(environ.items())
        if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES)
        and not any(word in k for word in SECRET_WORDS)
    }


def nccl_overrides(environ: dict[str, str]) -> list[str]:
    return [name for name in NCCL_OVERRIDES if environ.get(name, "").strip()]


def versions() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": None,
        "nccl": None,
    }
    with contextlib.suppress(Exception):  # not built with cuDNN
        out["cudnn"] = torch.backends.cudnn.version()
    if torch.cuda.is_available():
        try:
            nccl = torch.cuda.nccl.version()
            out["nccl"] = ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else nccl
        except Exception:  # built without NCCL
            pass
    return out


def numeric_flags() -> dict[str, Any]:
    """Process defaults for TF32, cuDNN and determinism (a training script may change them)."""
    import torch

    flags: dict[str, Any] = {}
    with warnings.catch_warnings():  # some of these getters are deprecated in newer torch
        warnings.simplefilter("ignore")
        matmul = torch.backends.cuda.matmul
        for name, getter in {
            "cuda_matmul_allow_tf32": lambda: matmul.allow_tf32,
            "cuda_matmul_fp32_precision": lambda: matmul.fp32_precision,
            "cudnn_allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
            "cudnn_enabled": lambda: torch.backends.cudnn.enabled,
            "cudnn_benchmark": lambda: torch.backends.cudnn.benchmark,
            "cudnn_deterministic": lambda: torch.backends.cudnn.deterministic,
            "float32_matmul_precision": torch.get_float32_matmul_precision,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        }.items():
            try:
                flags[name] = getter()
            except Exception:  # not in this torch version
                flags[name] = None
    return flags


def gpu_info(device: Any) -> dict[str, Any] | None:
    """The GPU this rank uses, with native bf16 support checked three ways."""
    import torch

    if not torch.cuda.is_available():
        return None
    index = device.index if device.type == "cuda" else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    capability = list(torch.cuda.get_device_capability(index))
    try:
        says = bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # older torch: no including_emulation
        says = bool(torch.cuda.is_bf16_supported())
    # Native bf16 arithmetic needs compute capability 8.0 (Ampere); ROCm reports it itself.
    native = says if torch.version.hip else capability >= [8, 0]
    works = None
    try:
        # A private generator leaves the global RNG state (which the seeds probe reads) alone.
        generator = torch.Generator(device=f"cuda:{index}").manual_seed(0)
        a = torch.randn(64, 64, device=f"cuda:{index}", generator=generator)
        low = (a.bfloat16() @ a.bfloat16()).float()
        works = bool(torch.allclose(low, a @ a, rtol=0.05, atol=0.5))
    except Exception:
        works = False
    return {
        "name": props.name,
        "capability": capability,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "count": torch.cuda.device_count(),
        "bf16_native": native,
        "bf16_torch_says": says,
        "bf16_matmul_works": works,
    }


def differences(per_rank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keys whose value is not the same on every rank, with each rank's value."""
    keys = sorted({k for record in per_rank for k in record})
    out = []
    for key in keys:
        values = [record.get(key) for record in per_rank]
        if any(v != values[0] for v in values):
            out.append({"key": key, "values": {str(r): v for r, v in enumerate(values)}})
    return out


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:

    environ = relevant_env(_harness.ORIGINAL_ENV)
    gpu = gpu_info(ctx.device)
    mine = {
        **versions(),
        "backend": ctx.backend,
        "host": socket.gethostname(),
        "gpu": gpu["name"] if gpu else None,
        "capability": gpu["capability"] if gpu else None,
        "bf16_native": gpu["bf16_native"] if gpu else None,
        **{f"env:{k}": v for k, v in environ.items()},
    }
    gathered = _harness.all_gather_json(mine, ctx.world_size)
    # Host names and per-rank GPUs are expected to differ; anything else is worth a look.
    expected = {"host"}
    diffs = [d for d in differences(gathered) if d["key"] not in expected]
    overrides = nccl_overrides(_harness.ORIGINAL_ENV)
    hosts = sorted({g["host"] for g in gathered})
    summary = (
        f"torch {mine['torch']}, {ctx.backend}, {ctx.world_size} ranks on {len(hosts)} host(s), "
        + (f"GPU {gpu['name']} (sm{''.join(map(str, gpu['capability']))})" if gpu else "no GPU")
        + f", NCCL overrides: {', '.join(overrides) or 'none'}"
        + (f", {len(diffs)} setting(s) differ between ranks" if diffs else "")
    )
    return {
        "summary": summary,
        "subject": "environment",
        "versions": {k: mine[k] for k in ("python", "torch", "cuda", "hip", "cudnn", "nccl")},
        "backend": ctx.backend,
        "world_size": ctx.world_size,
        "local_world_size": ctx.local_world_size,
        "hosts": hosts,
        "gpu": gpu,
        "env": environ,
        "nccl_overrides": overrides,
        "nccl_algo": _harness.ORIGINAL_ENV.get("NCCL_ALGO"),
        "nccl_proto": _harness.ORIGINAL_ENV.get("NCCL_PROTO"),
        "flags": numeric_flags(),
        "consistent": not diffs,
        "differences": diffs,
    }


if __name__ == "__main__":
    sys.exit(_harness.probe_main([sys.modules[__name__]]))
