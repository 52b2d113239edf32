"""Probe `env`: versions, backend, GPU and bf16 support, NCCL / torch.distributed settings.

Run alone: ``torchrun --nproc_per_node N env.py --out DIR`` (stdlib + torch only).
Each rank records what it sees, then all ranks compare, so a node with another torch, NCCL,
GPU or environment variable stands out.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib
import importlib.util
import json
import os
import platform
import socket
import sys
import time
import traceback
import types
import warnings
from typing import Any

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
    import torch.distributed as dist

    environ = relevant_env(ORIGINAL_ENV)
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
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, mine)
    # Host names and per-rank GPUs are expected to differ; anything else is worth a look.
    expected = {"host"}
    diffs = [d for d in differences(gathered) if d["key"] not in expected]
    overrides = nccl_overrides(ORIGINAL_ENV)
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
        "nccl_algo": ORIGINAL_ENV.get("NCCL_ALGO"),
        "nccl_proto": ORIGINAL_ENV.get("NCCL_PROTO"),
        "flags": numeric_flags(),
        "consistent": not diffs,
        "differences": diffs,
    }


# >>> harness >>>
# The same text sits at the end of every probe file (tests/test_probes_static.py checks it),
# so that each file runs alone under torchrun or srun with nothing but torch installed.
# run_all.py drives several probes through it in one launch.

FORMAT = 1
FAULT_ENV = "DDPADVISOR_PROBE_FAULT"  # test-only fault injection, see probes/README.md
ORIGINAL_ENV = dict(os.environ)  # before the harness adds anything


def fault_for(probe: str, rank: int) -> str | None:
    """Injected fault for this probe and rank, from ``KIND:rank=R[:probe=NAME]`` (tests only)."""
    kind, *options = os.environ.get(FAULT_ENV, "").split(":")
    fields = dict(opt.split("=", 1) for opt in options if "=" in opt)
    if not kind or fields.get("rank", str(rank)) != str(rank):
        return None
    return kind if fields.get("probe", probe) == probe else None


def load_object(spec: str) -> Any:
    """Import ``MODULE:NAME`` or ``path/to/file.py:NAME``, relative to the working folder."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise ValueError(f"expected MODULE:NAME, got {spec!r}")
    if module_name.endswith(".py"):
        loader_spec = importlib.util.spec_from_file_location(
            os.path.basename(module_name)[:-3], module_name
        )
        if loader_spec is None or loader_spec.loader is None:
            raise ImportError(f"cannot load {module_name}")
        module = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def write_json(path: str, data: dict[str, Any]) -> None:
    """Write atomically: a reader sees the whole file or none of it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(tmp, path)


def set_status(out: str, rank: int, state: str, probe: str | None = None, **extra: Any) -> None:
    record = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "state": state}
    write_json(
        os.path.join(out, "status", f"rank{rank}.json"),
        {**record, "probe": probe, "time": time.time(), **extra},
    )


def init_distributed(backend: str, timeout: float) -> types.SimpleNamespace:
    """Join the job started by torchrun or srun, or form a job of one when run directly."""
    import torch
    import torch.distributed as dist

    env = os.environ
    if "RANK" not in env and "SLURM_PROCID" in env:  # srun without torchrun
        if "MASTER_ADDR" not in env:
            raise RuntimeError("under srun, export MASTER_ADDR=<first node> (and MASTER_PORT)")
        env.update(RANK=env["SLURM_PROCID"], WORLD_SIZE=env["SLURM_NTASKS"])
        env.setdefault("LOCAL_RANK", env.get("SLURM_LOCALID", "0"))
        if env.get("SLURM_NTASKS_PER_NODE", "").isdigit():
            env.setdefault("LOCAL_WORLD_SIZE", env["SLURM_NTASKS_PER_NODE"])
        env.setdefault("MASTER_PORT", "29500")
    elif "RANK" not in env:  # plain `python probe.py`
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            env["MASTER_PORT"] = str(sock.getsockname()[1])
    local_rank = int(env.get("LOCAL_RANK", "0"))
    if backend == "auto":
        cuda_ok = torch.cuda.is_available() and torch.cuda.device_count() > local_rank
        backend = "nccl" if cuda_ok else "gloo"
    device = torch.device("cpu")
    kwargs: dict[str, Any] = {"timeout": datetime.timedelta(seconds=timeout)}
    if backend == "nccl":
        if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise RuntimeError(f"nccl needs a GPU for local rank {local_rank}; {count} visible")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        env.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")  # a timeout raises instead of aborting
        kwargs["device_id"] = device
    try:
        dist.init_process_group(backend, **kwargs)
    except TypeError:  # torch without device_id
        kwargs.pop("device_id", None)
        dist.init_process_group(backend, **kwargs)
    # A gloo group gives monitored_barrier, which names the ranks that never arrive.
    monitor = (
        None if backend == "gloo" else dist.new_group(backend="gloo", timeout=kwargs["timeout"])
    )
    return types.SimpleNamespace(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local_rank,
        local_world_size=int(env.get("LOCAL_WORLD_SIZE", "1")),
        backend=backend,
        device=device,
        timeout=timeout,
        monitor_group=monitor,
    )


def probe_main(modules: list[types.ModuleType], argv: list[str] | None = None) -> int:
    """Run the probes in order; each rank writes OUT/<probe>/rank<k>.json."""
    parser = argparse.ArgumentParser(
        description="ddpadvisor probes: " + ", ".join(m.NAME for m in modules),
        conflict_handler="resolve",
    )
    parser.add_argument("--out", default="probe-results", help="folder for the results")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a collective waits")
    for module in modules:
        module.add_args(parser)
    args = parser.parse_args(argv)
    # As a script, this folder comes first on sys.path, where names such as `env` or `sampler`
    # would shadow the user's modules; probes load each other by path instead.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    set_status(args.out, rank, "starting")
    try:
        ctx = init_distributed(args.backend, args.timeout)
    except Exception as exc:
        set_status(args.out, rank, "failed", error=f"init: {type(exc).__name__}: {exc}")
        raise
    import torch.distributed as dist

    for module in modules:
        set_status(args.out, ctx.rank, "running", module.NAME)
        started = time.perf_counter()
        result: dict[str, Any] = {}
        error = trace = None
        try:
            if ctx.world_size > 1:
                dist.monitored_barrier(
                    group=ctx.monitor_group,
                    timeout=datetime.timedelta(seconds=ctx.timeout),
                    wait_all_ranks=True,
                )
            fault = fault_for(module.NAME, ctx.rank)
            while fault == "hang":
                time.sleep(1.0)
            if fault == "crash":
                os._exit(86)
            if fault == "raise":
                raise RuntimeError(f"injected fault ({FAULT_ENV})")
            result = module.run(args, ctx)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}".strip()
            trace = traceback.format_exc()
        record = {
            "format": FORMAT,
            "probe": module.NAME,
            "rank": ctx.rank,
            "world_size": ctx.world_size,
            "local_rank": ctx.local_rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "backend": ctx.backend,
            "device": str(ctx.device),
            "seconds": round(time.perf_counter() - started, 4),
            "status": "error" if error else "ok",
            "error": error,
            "traceback": trace,
            "subject": result.pop("subject", "builtin"),
            "summary": result.pop("summary", ""),
            "result": result,
        }
        write_json(os.path.join(args.out, module.NAME, f"rank{ctx.rank}.json"), record)
        if error:
            set_status(args.out, ctx.rank, "failed", module.NAME, error=error)
            sys.stderr.write(f"[rank{ctx.rank}] probe {module.NAME} failed: {trace}")
            sys.stderr.flush()
            os._exit(1)  # peers may wait in a collective; torchrun stops them
    set_status(args.out, ctx.rank, "done")
    # No DDP model may outlive the group (gloo can abort at exit). Probes delete theirs and
    # DDP holds no reference cycles, so a cheap young-generation pass is enough here.
    gc.collect(1)
    dist.destroy_process_group()
    # Everything is written. Skip the interpreter's teardown, which takes seconds once DDP has
    # pulled in torch._dynamo, and would only free memory.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(probe_main([sys.modules[__name__]]))
# <<< harness <<<
