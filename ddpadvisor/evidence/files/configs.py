"""Configs and the launch command: DeepSpeed JSON, accelerate config YAML, TrainingArguments
(JSON or YAML; ``training_args.bin`` is a pickle and is never loaded), and the ``torchrun`` /
``python -m torch.distributed.run`` / ``accelerate launch`` / ``deepspeed`` command line with
the script's HF-style flags.

A DeepSpeed value of ``"auto"`` is filled in by the HF integration from TrainingArguments: it
stays undecided here, and the TrainingArguments attached beside it (or the script's flags)
settle the same fact on their own.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ddpadvisor.evidence.files.found import Read
from ddpadvisor.evidence.files.text import Text

_DS_KEYS = {
    "train_micro_batch_size_per_gpu",
    "train_batch_size",
    "zero_optimization",
    "gradient_accumulation_steps",
    "gradient_clipping",
    "fp16",
    "bf16",
    "zero_allow_untested_optimizer",
    "steps_per_print",
    "wall_clock_breakdown",
}
_TA_KEYS = {
    "per_device_train_batch_size",
    "output_dir",
    "gradient_accumulation_steps",
    "learning_rate",
    "num_train_epochs",
    "logging_steps",
}
_ACC_KEYS = {"compute_environment", "distributed_type", "mixed_precision", "num_processes"}


def _line(text: str, key: str) -> int | None:
    m = re.search(rf"[\"']?{re.escape(key)}[\"']?\s*[:=]", text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def is_deepspeed(data: Any) -> bool:
    return isinstance(data, dict) and len(_DS_KEYS & set(data)) >= 2 and "output_dir" not in data


def is_training_args(data: Any) -> bool:
    return isinstance(data, dict) and len(_TA_KEYS & set(data)) >= 3


def is_accelerate(data: Any) -> bool:
    return isinstance(data, dict) and len(_ACC_KEYS & set(data)) >= 2


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def _on(section: Any) -> bool | None:
    if isinstance(section, dict):
        enabled = section.get("enabled")
        if isinstance(enabled, bool):
            return enabled
        return None if enabled == "auto" else (True if enabled is None and section else None)
    return None


def _add_int(
    out: Read, doc: Text, data: dict[str, Any], key: str, fact: str, what: str
) -> int | None:
    """``fact`` from the whole number a config sets under ``key``, cited at that key's line;
    the number (None when the config sets none)."""
    value = _int(data.get(key))
    if value is not None:
        out.add(fact, value, doc.where(_line(doc.text, key)), f"{what} {key} is {value}")
    return value


def _accumulation_and_clipping(out: Read, doc: Text, data: dict[str, Any], what: str) -> None:
    """A DeepSpeed config's gradient_accumulation_steps and gradient_clipping, as they stand in
    its own JSON or in accelerate's deepspeed_config section (``what`` names which)."""
    t = doc.text
    _add_int(out, doc, data, "gradient_accumulation_steps", "grad_accum_steps", what)
    clip = data.get("gradient_clipping")
    if isinstance(clip, (int, float)) and not isinstance(clip, bool):
        out.add(
            "uses_grad_clipping",
            clip > 0,
            doc.where(_line(t, "gradient_clipping")),
            f"{what} gradient_clipping is {clip}",
        )


def deepspeed(doc: Text, data: dict[str, Any]) -> Read:
    out = Read("deepspeed-config")
    t = doc.text
    auto = sorted(_auto_keys(data))
    fp16, bf16 = _on(data.get("fp16")), _on(data.get("bf16") or data.get("bfloat16"))
    if fp16:
        out.add(
            "precision", "fp16_amp", doc.where(_line(t, "fp16")), "DeepSpeed fp16.enabled is true"
        )
        scale = data["fp16"].get("loss_scale", 0)
        how = "dynamic" if scale in (0, 0.0, None) else f"static {scale}"
        power = data["fp16"].get("initial_scale_power")
        low = data["fp16"].get("min_loss_scale")
        out.add(
            "uses_grad_scaler",
            True,
            doc.where(_line(t, "fp16")),
            f"DeepSpeed fp16 scales the loss ({how} loss scale"
            + (f", initial 2**{power}" if isinstance(power, int) else "")
            + (f", minimum {low}" if low is not None else "")
            + ")",
        )
    elif bf16:
        out.add(
            "precision", "bf16_amp", doc.where(_line(t, "bf16")), "DeepSpeed bf16.enabled is true"
        )
        if fp16 is False or "fp16" not in data:
            out.add(
                "uses_grad_scaler",
                False,
                doc.where(_line(t, "bf16")),
                "DeepSpeed bf16 runs without loss scaling",
            )
    elif fp16 is False and bf16 in (False, None) and "bf16" in data:
        out.add(
            "precision",
            "fp32",
            doc.where(_line(t, "fp16")),
            "DeepSpeed fp16 and bf16 are both disabled",
        )
    zero = data.get("zero_optimization")
    stage = _int(zero.get("stage")) if isinstance(zero, dict) else None
    if stage is not None:
        out.add(
            "uses_fsdp_or_zero",
            stage >= 1,
            doc.where(_line(t, "stage")),
            f"DeepSpeed zero_optimization.stage is {stage}",
        )
    micro = _add_int(
        out, doc, data, "train_micro_batch_size_per_gpu", "per_gpu_batch_size", "DeepSpeed"
    )
    _accumulation_and_clipping(out, doc, data, "DeepSpeed")
    accum = _int(data.get("gradient_accumulation_steps"))
    opt = data.get("optimizer")
    if isinstance(opt, dict) and isinstance(opt.get("type"), str):
        family = _family(opt["type"])
        if family:
            out.add(
                "optimizer_family",
                family,
                doc.where(_line(t, "optimizer")),
                f"DeepSpeed optimizer.type is {opt['type'][:30]}",
            )
    sched = data.get("scheduler")
    if isinstance(sched, dict) and isinstance(sched.get("params"), dict):
        warm = _int(sched["params"].get("warmup_num_steps"))
        if warm is not None:
            out.add(
                "warmup_steps",
                warm,
                doc.where(_line(t, "warmup_num_steps")),
                f"DeepSpeed scheduler warmup_num_steps is {warm}",
            )
    total = _int(data.get("train_batch_size"))
    if total and micro and accum:
        world = total // (micro * accum)
        if world * micro * accum == total:
            out.world_size = world
            out.add(
                "world_size",
                world,
                doc.where(_line(t, "train_batch_size")),
                f"DeepSpeed train_batch_size {total} = {micro} per GPU x {accum} accumulation x {world} GPUs",
            )
    if auto:
        out.warnings.append(
            f'{doc.name}: {", ".join(auto[:8])} {"is" if len(auto) == 1 else "are"} "auto" '
            "(filled in from TrainingArguments by the HF integration): undecided unless the "
            "TrainingArguments or the script's flags are attached too"
        )
    return out


def _auto_keys(data: Any, prefix: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if value == "auto":
                found.append(name[:60])
            elif isinstance(value, dict):
                found.extend(_auto_keys(value, name))
    return found


def _family(name: str) -> str | None:
    low = name.lower()
    if "adam" in low:
        return "adam"
    if "sgd" in low:
        return "sgd"
    if low in ("lamb", "onebitlamb", "lion", "adafactor", "muon", "lars"):
        return "other"
    return None


def accelerate(doc: Text, data: dict[str, Any]) -> Read:
    out = Read("accelerate-config")
    t = doc.text
    mp = data.get("mixed_precision")
    precision = (
        {"no": "fp32", "fp16": "fp16_amp", "bf16": "bf16_amp"}.get(str(mp).lower())
        if mp is not None
        else None
    )
    if mp is False:
        precision = "fp32"
    if precision:
        out.add(
            "precision",
            precision,
            doc.where(_line(t, "mixed_precision")),
            f"accelerate config mixed_precision is {str(mp)[:10]}",
        )
        dist = str(data.get("distributed_type", "")).upper()
        if precision == "fp16_amp" and dist != "DEEPSPEED":
            out.add(
                "uses_grad_scaler",
                True,
                doc.where(_line(t, "mixed_precision")),
                "accelerate's fp16 mixed precision scales the loss with torch.amp's GradScaler",
            )
        elif precision in ("fp32", "bf16_amp"):
            out.add(
                "uses_grad_scaler",
                False,
                doc.where(_line(t, "mixed_precision")),
                f"accelerate's {precision} runs without a GradScaler",
            )
    n = _int(data.get("num_processes"))
    dist = str(data.get("distributed_type", "")).upper()
    if n is not None and n >= 1 and dist not in ("", "NO"):
        out.world_size = n
        out.add(
            "world_size",
            n,
            doc.where(_line(t, "num_processes")),
            f"accelerate config num_processes is {n} (all machines together)",
        )
    if dist in ("DEEPSPEED", "FSDP"):
        raw = data.get("deepspeed_config")
        ds: dict[str, Any] = raw if isinstance(raw, dict) else {}
        stage = _int(ds.get("zero_stage")) if dist == "DEEPSPEED" else 1
        if stage is not None:
            out.add(
                "uses_fsdp_or_zero",
                stage >= 1,
                doc.where(_line(t, "distributed_type")),
                f"accelerate distributed_type is {dist}"
                + (f", zero_stage {stage}" if dist == "DEEPSPEED" else ""),
            )
        _accumulation_and_clipping(out, doc, ds, "accelerate deepspeed_config")
    elif dist == "MULTI_GPU":
        out.add(
            "uses_fsdp_or_zero",
            False,
            doc.where(_line(t, "distributed_type")),
            "accelerate distributed_type is MULTI_GPU (plain DDP)",
        )
    return out


def training_args(doc: Text, data: dict[str, Any], what: str = "TrainingArguments") -> Read:
    out = Read("training-args")
    t = doc.text

    def where(key: str) -> str:
        return doc.where(_line(t, key))

    _add_int(out, doc, data, "per_device_train_batch_size", "per_gpu_batch_size", what)
    _add_int(out, doc, data, "gradient_accumulation_steps", "grad_accum_steps", what)
    fp16, bf16 = data.get("fp16"), data.get("bf16")
    if fp16 is True:
        out.add("precision", "fp16_amp", where("fp16"), f"{what} fp16 is true")
    elif bf16 is True:
        out.add("precision", "bf16_amp", where("bf16"), f"{what} bf16 is true")
    elif fp16 is False and bf16 is False and not data.get("deepspeed"):
        out.add("precision", "fp32", where("fp16"), f"{what} fp16 and bf16 are false")
    clip = data.get("max_grad_norm")
    if isinstance(clip, (int, float)) and not isinstance(clip, bool):
        out.add(
            "uses_grad_clipping",
            clip > 0,
            where("max_grad_norm"),
            f"{what} max_grad_norm is {clip}",
        )
    warm = _int(data.get("warmup_steps"))
    if warm:
        out.add("warmup_steps", warm, where("warmup_steps"), f"{what} warmup_steps is {warm}")
    elif (
        isinstance(data.get("warmup_ratio"), (int, float))
        and _int(data.get("max_steps"))
        and data["max_steps"] > 0
    ):
        w = int(data["warmup_ratio"] * data["max_steps"] + 0.999999)
        out.add(
            "warmup_steps",
            w,
            where("warmup_ratio"),
            f"{what} warmup_ratio {data['warmup_ratio']} of max_steps {data['max_steps']}",
        )
    elif warm == 0 and not data.get("warmup_ratio"):
        out.add("warmup_steps", 0, where("warmup_steps"), f"{what} sets no warmup")
    opt = data.get("optim")
    if isinstance(opt, str) and _family(opt.replace("_torch", "").replace("_hf", "")):
        out.add("optimizer_family", _family(opt), where("optim"), f"{what} optim is {opt[:30]}")
    if data.get("torch_compile") is True:
        out.add("uses_torch_compile", True, where("torch_compile"), f"{what} torch_compile is true")
    return out


# -- launch command -------------------------------------------------------------------------------

# A line that starts (after a prompt or comment mark) with a launcher: torchrun, python -m
# torch.distributed.run / .launch, accelerate launch, deepspeed (any path before the name).
_LAUNCH = re.compile(
    r"^[ \t$#>]*((?:[\w.=/-]+=\S*\s+)*(?:\S*/)?(?:torchrun\b|python[\d.]*\s+-m\s+"
    r"torch\.distributed\.(?:run|launch)\b|accelerate\s+launch\b|deepspeed\s).*)$",
    re.M,
)


def launch_line(text: str) -> tuple[int, str] | None:
    """The first launch command in the text (joined across backslash line ends), with its
    line."""
    m = _LAUNCH.search(text)
    if m is None:
        return None
    number = text.count("\n", 0, m.start()) + 1
    lines = text[m.start() :].splitlines()
    joined = m.group(1).strip()
    j = 0
    while joined.endswith("\\") and j + 1 < len(lines):
        j += 1
        joined = joined[:-1] + " " + lines[j].strip()
    return number, joined


def _opt(words: list[str], *names: str) -> str | None:
    for k, w in enumerate(words):
        for name in names:
            if w == name and k + 1 < len(words):
                return words[k + 1]
            if w.startswith(name + "="):
                return w.split("=", 1)[1]
    return None


def launch_command(doc: Text, line: int, command: str) -> Read:
    out = Read("launch-command")
    try:
        words = shlex.split(command, comments=False)
    except ValueError:
        words = command.split()
    where = doc.where(line)
    script_at = next((k for k, w in enumerate(words) if w.endswith(".py")), len(words))
    launcher, args = words[:script_at], words[script_at + 1 :]
    joined = " ".join(launcher)
    world: int | None = None
    how = ""
    if "accelerate" in joined:
        n = _int(_opt(launcher, "--num_processes", "--num-processes"))
        if n:
            world, how = n, f"accelerate launch --num_processes {n} (all machines together)"
        if "--mixed_precision" in joined or "--mixed-precision" in joined:
            mp = _opt(launcher, "--mixed_precision", "--mixed-precision")
            p = {"no": "fp32", "fp16": "fp16_amp", "bf16": "bf16_amp"}.get(str(mp))
            if p:
                out.add("precision", p, where, f"accelerate launch --mixed_precision {mp}")
    elif words and (words[0].endswith("deepspeed") or " deepspeed " in f" {joined} "):
        n = _int(_opt(launcher, "--num_gpus", "--num-gpus"))
        ds_nodes = _int(_opt(launcher, "--num_nodes", "--num-nodes")) or 1
        if n:
            world, how = n * ds_nodes, f"deepspeed --num_gpus {n} x {ds_nodes} node(s)"
    else:
        n = _int(_opt(launcher, "--nproc_per_node", "--nproc-per-node"))
        nodes_raw = _opt(launcher, "--nnodes")
        nodes = _int(nodes_raw) if nodes_raw is not None else 1
        if n and nodes:
            world, how = n * nodes, f"torchrun --nproc_per_node {n} x --nnodes {nodes_raw or 1}"
        elif n and nodes is None:
            out.warnings.append(
                f"{where}: --nnodes {nodes_raw[:20] if nodes_raw else ''} is a range: the world size is not fixed by the command"
            )
    if world:
        out.world_size = world
        out.add("world_size", world, where, how)
    flags = _script_flags(args)
    if flags:
        got = training_args(doc, flags, "the script's flag")
        for f in got.findings:
            f.where = where
        out.findings.extend(got.findings)
    return out


def _script_flags(args: list[str]) -> dict[str, Any]:
    """HF-style ``--name value`` / ``--flag`` arguments of the script, typed."""
    out: dict[str, Any] = {}
    k = 0
    while k < len(args):
        w = args[k]
        if w.startswith("--"):
            name, _, value = w[2:].partition("=")
            if not value and k + 1 < len(args) and not args[k + 1].startswith("--"):
                value = args[k + 1]
                k += 1
            name = name.replace("-", "_")
            if not value:
                out[name] = True
            elif value.lower() in ("true", "false"):
                out[name] = value.lower() == "true"
            else:
                try:
                    out[name] = int(value)
                except ValueError:
                    try:
                        out[name] = float(value)
                    except ValueError:
                        out[name] = value
        k += 1
    return out
