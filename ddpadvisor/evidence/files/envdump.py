"""Environment dumps: ``python -m torch.utils.collect_env``, ``pip list`` / ``pip freeze``,
``nvidia-smi`` (and ``-L``, ``-q``), ``accelerate env``, and ``NCCL_*=`` assignments
(``env | grep NCCL``), ``transformers-cli env``. They settle the torch version, the GPU model,
NCCL overrides, and installed versions with a known defect (``versions.DEFECTS``).

The GPUs a machine shows bound the world size from above (a job may use fewer, or several
machines): the count is said in a warning, never stated as the world size.
"""

from __future__ import annotations

import re

from ddpadvisor.evidence.files import versions
from ddpadvisor.evidence.files.found import Read
from ddpadvisor.evidence.files.text import Text

_TORCH = [
    re.compile(r"^PyTorch version:\s*(\d+\.\d+(?:\.\d+)?)", re.M),  # collect_env
    re.compile(r"^- PyTorch version \(GPU\?\):\s*(\d+\.\d+(?:\.\d+)?)", re.M),  # accelerate env
    re.compile(r"^torch\s*==\s*(\d+\.\d+(?:\.\d+)?)", re.M),  # pip freeze
    re.compile(r"^torch\s+(\d+\.\d+(?:\.\d+)?)\b", re.M),  # pip list
    re.compile(r"^\[pip3?\] torch==(\d+\.\d+(?:\.\d+)?)", re.M),  # collect_env's library list
]
_GPU_LINES = [
    re.compile(r"^GPU \d+: (?:NVIDIA )?([^\n(]+?)(?:\s*\(UUID|\s*$)", re.M),  # collect_env, -L
    re.compile(r"^\|\s*\d+\s+(?:NVIDIA )?([A-Za-z][\w .-]+?)\s+(?:On|Off)\s+\|", re.M),  # table
    re.compile(r"^\s*Product Name\s*:\s*(?:NVIDIA )?(.+)$", re.M),  # nvidia-smi -q
    re.compile(r"^- GPU type: (?:NVIDIA )?(.+)$", re.M),  # accelerate env
]
_NCCL = re.compile(r"^(?:export\s+|- )?(NCCL_[A-Z0-9_]+)\s*[=:]\s*(\S*)", re.M)


def markers(text: str) -> list[str]:
    """Which environment dumps the text holds (a pasted file may hold several)."""
    found = []
    if "PyTorch version:" in text and ("Is debug build" in text or "CUDA used to build" in text):
        found.append("collect-env")
    if (
        "NVIDIA-SMI" in text
        or re.search(r"^GPU \d+: .+\(UUID: ", text, re.M)
        or "Product Name" in text
    ):
        found.append("nvidia-smi")
    if "`Accelerate` version" in text or "- `Accelerate` default config" in text:
        found.append("accelerate-env")
    if "- `transformers` version:" in text:
        found.append("transformers-env")
    if (
        re.search(r"^Package\s+Version\s*$", text, re.M)
        or len(re.findall(r"^[A-Za-z0-9_.-]+==\S+$", text, re.M)) >= 5
    ):
        found.append("pip-list")
    if _NCCL.search(text):
        found.append("nccl-env")
    return found


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def environment(doc: Text) -> Read:
    out = Read("environment")
    t = doc.text
    for pattern in _TORCH:
        m = pattern.search(t)
        if m:
            out.add(
                "torch_version",
                m.group(1),
                doc.where(_line(t, m.start())),
                f"the environment dump names torch {m.group(1)}",
            )
            break
    gpus: list[tuple[str, int]] = []
    for pattern in _GPU_LINES:
        gpus = [(m.group(1).strip(), _line(t, m.start())) for m in pattern.finditer(t)]
        if gpus:
            break
    if gpus:
        models = sorted({g for g, _ in gpus})
        name, line = gpus[0]
        if len(models) == 1:
            out.add(
                "gpu_model",
                name[:60],
                doc.where(line),
                f"the environment dump lists {len(gpus)} x {name[:60]}",
            )
        else:
            out.warnings.append(
                f"{doc.where(line)}: the machine shows {len(models)} GPU models; gpu_model left to you"
            )
        out.warnings.append(
            f"{doc.name}: the machine shows {len(gpus)} GPU(s): an upper bound on the GPUs a job "
            "there uses, not its world size (a job may use fewer, or several machines)"
        )
    out.extend(versions.defects(doc))
    nccl = [(m.group(1), m.group(2), _line(t, m.start())) for m in _NCCL.finditer(t)]
    nccl = [(k, v, ln) for k, v, ln in nccl if v and v.lower() not in ("unset", "none", "")]
    if nccl:
        names = ", ".join(sorted({k for k, _, _ in nccl}))[:120]
        out.add("nccl_env_overrides", True, doc.where(nccl[0][2]), f"the dump sets {names}")
        algo = next(((v, ln) for k, v, ln in nccl if k in ("NCCL_ALGO", "NCCL_PROTO")), None)
        if algo:
            out.add(
                "nccl_algo",
                algo[0][:30],
                doc.where(algo[1]),
                f"NCCL_ALGO/NCCL_PROTO is {algo[0][:30]}",
            )
    return out
