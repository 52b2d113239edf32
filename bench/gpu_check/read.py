"""Read what bench/gpu_check/run.sh brought back, with ddpadvisor's own readers.

    . .venv/bin/activate && python bench/gpu_check/read.py gpu_check.tar.gz   (or the folder)

For every step it prints the exit code and duration, the measured facts of interest, the top 3
causes with their scores, and whether they match what the step was built to show: correct jobs
must not rank a catalogued cause at 0.30 or more first; the clip-before-unscale job must rank
clip-before-unscale first, the job without DistributedSampler no-distributed-sampler. Traces
are read as measured (``read_trace``), without the scan of the traced script that
``ddpadvisor --json --trace`` adds when the script is at hand, so results read the same on any
machine. Exit 0 whenever the input could be read (this is a report, failed expectations
included); 2, with one line on stderr, when the input is missing or malformed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NVIDIA_SMI_KEYS = ("Driver Version", "Product Name", "Compute Mode")
HEALTHY_BELOW = 0.30  # a correct job may not rank a catalogued cause this high first

ENV_FACTS = ["gpu_model", "gpu_supports_bf16", "torch_version", "world_size", "nccl_env_overrides"]
PROBE_FACTS = [
    "allreduce_correct",
    "rank_seeds_identical",
    "sampler_shards_overlap",
    "sampler_order_repeats_across_epochs",
    "param_checksums_match",
    "buffer_checksums_match",
    "grads_match_after_sync",
    "params_not_in_reducer",
    "scaler_state_match",
]
TRACE_FACTS = [
    "world_size",
    "precision",
    "uses_grad_scaler",
    "uses_grad_clipping",
    "unscale_before_clip",
    "uses_distributed_sampler",
    "batches_duplicated_across_ranks",
    "sampler_shards_overlap",
    "rank_losses_identical",
    "nonfinite_grad_steps",
    "param_checksums_match",
    "grads_match_after_sync",
    "optimizer_state_match",
    "scaler_state_match",
    "clip_norms_match_across_ranks",
]


class BadInput(Exception):
    """The input is missing or malformed (exit 2)."""


@dataclass
class Step:
    name: str
    rc: str
    seconds: str
    timeout: str
    note: str


@dataclass
class Outcome:
    """What one step showed."""

    lines: list[tuple[str, str]] = field(default_factory=list)  # (label, text)
    checks: list[tuple[bool, str]] = field(default_factory=list)
    top: str = "-"
    skipped: bool = False

    def check(self, ok: bool, text: str) -> None:
        self.checks.append((ok, text))

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if not self.checks:
            return "-"
        failed = sum(1 for ok, _ in self.checks if not ok)
        return "PASS" if not failed else f"FAIL {failed}/{len(self.checks)}"


# ---------------------------------------------------------------- input


@contextlib.contextmanager
def opened(path: Path) -> Iterator[Path]:
    """The folder holding steps.tsv: ``path`` itself, its gpu_check/, or the archive's."""
    if not path.exists():
        raise BadInput(f"{path}: no such file or folder")
    if path.is_file():
        if not tarfile.is_tarfile(path):
            raise BadInput(f"{path}: not a tar archive")
        with tempfile.TemporaryDirectory(prefix="gpu_check_read.") as tmp:
            try:
                with tarfile.open(path) as tar:
                    if hasattr(tarfile, "data_filter"):
                        tar.extractall(tmp, filter="data")
                    else:  # older Python: refuse absolute and climbing names
                        for member in tar.getmembers():
                            if member.name.startswith("/") or ".." in Path(member.name).parts:
                                raise BadInput(f"{path}: unsafe member name {member.name!r}")
                        tar.extractall(tmp)
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise BadInput(f"{path}: damaged archive ({exc})") from exc
            yield root_of(Path(tmp), path)
        return
    yield root_of(path, path)


def root_of(folder: Path, shown: Path) -> Path:
    for candidate in (folder, folder / "gpu_check"):
        if (candidate / "steps.tsv").is_file():
            return candidate
    raise BadInput(f"{shown}: no steps.tsv (not the output of bench/gpu_check/run.sh)")


def read_steps(root: Path) -> dict[str, Step]:
    lines = (root / "steps.tsv").read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or lines[0].split("\t")[:2] != ["step", "rc"]:
        raise BadInput(f"{root / 'steps.tsv'}:1: expected the header 'step<TAB>rc<TAB>...'")
    steps: dict[str, Step] = {}
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != 5:
            raise BadInput(f"{root / 'steps.tsv'}:{number}: expected 5 tab-separated cells")
        steps[cells[0]] = Step(*cells)
    if not steps:
        raise BadInput(f"{root / 'steps.tsv'}: no step recorded")
    return steps


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_mode(root: Path) -> dict[str, str]:
    mode: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in (root / "mode.txt").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            mode[key.strip()] = value.strip()
    return mode


# ---------------------------------------------------------------- ddpadvisor's readers


class Reader:
    """ddpadvisor's engine and readers, imported once (they need the project's venv)."""

    def __init__(self) -> None:
        try:
            from ddpadvisor.errors import InputError
            from ddpadvisor.evidence.probe_results import read_probe_results
            from ddpadvisor.evidence.trace import read_trace
            from ddpadvisor.kb.values import classify
            from ddpadvisor.report.present import diagnose
            from ddpadvisor.service import load_engine
        except ImportError as exc:
            raise BadInput(
                f"cannot import ddpadvisor ({exc}); activate the project's venv"
            ) from exc
        self.engine = load_engine()
        self.input_error: type[Exception] = InputError
        self.readers: dict[str, Callable[..., Any]] = {
            "probes": read_probe_results,
            "trace": read_trace,
        }
        self.classify = classify
        self.present = diagnose

    def diagnose(self, kind: str, folder: Path) -> tuple[Any, Any]:
        """(Gathered, Diagnosis) of a probe-results or trace folder."""
        got = self.readers[kind](self.engine.kb, folder)
        diagnosis = self.present(self.engine, got.observations, warnings=got.warnings)
        return got, diagnosis

    def shown(self, fact: str, value: Any) -> str:
        spec = self.engine.kb.facts.get(fact)
        if spec is not None and spec.type == "str" and spec.classes:
            with contextlib.suppress(Exception):
                return f"{value} [{self.classify(spec, value)}]"
        return str(value)


def one_line(exc: Exception) -> str:
    method = getattr(exc, "one_line", None)
    return str(method()) if callable(method) else str(exc).replace("\n", " ")


def facts_of(diagnosis: Any) -> dict[str, Any]:
    return {f.fact: f.value for f in diagnosis.facts}


def top_causes(diagnosis: Any, n: int = 3) -> list[tuple[str, float, bool]]:
    return [(c.id, float(c.score), bool(c.catch_all)) for c in diagnosis.causes[:n]]


def causes_text(diagnosis: Any) -> str:
    return "  ".join(
        f"{i}. {cid}{' (catch-all)' if catch else ''} {score:.3f}"
        for i, (cid, score, catch) in enumerate(top_causes(diagnosis), start=1)
    )


def healthy(diagnosis: Any) -> tuple[bool, str]:
    causes = top_causes(diagnosis, 1)
    if not causes:
        return False, "no cause ranked"
    cid, score, catch = causes[0]
    ok = catch or score < HEALTHY_BELOW
    return ok, f"no catalogued cause >= {HEALTHY_BELOW:.2f} first (first: {cid} {score:.3f})"


def first_is(diagnosis: Any, cause: str) -> tuple[bool, str]:
    causes = top_causes(diagnosis, 1)
    got = f"{causes[0][0]} {causes[0][1]:.3f}" if causes else "nothing"
    return bool(causes) and causes[0][0] == cause, f"first cause is {cause} (got {got})"


def fact_is(facts: dict[str, Any], fact: str, want: Any) -> tuple[bool, str]:
    got = facts.get(fact, "unobserved")
    return got == want, f"{fact} = {want} (got {got})"


def facts_line(reader: Reader, facts: dict[str, Any], names: list[str]) -> str:
    return "  ".join(f"{n}={reader.shown(n, facts[n])}" for n in names if n in facts) or "none"


# ---------------------------------------------------------------- per step


def read_preflight(root: Path, mode: dict[str, str], out: Outcome) -> None:
    data = read_json(root / "preflight.json")
    if not isinstance(data, dict):
        out.lines.append(("result", "preflight.json missing or unreadable"))
        out.check(False, "preflight.json written")
        return
    versions = data.get("versions") if isinstance(data.get("versions"), dict) else {}
    gpu = versions.get("gpu") or {}
    out.lines.append(
        (
            "versions",
            f"python {data.get('python')}, torch {versions.get('torch')}, CUDA "
            f"{versions.get('cuda')}, cuDNN {versions.get('cudnn')}, NCCL {versions.get('nccl')}"
            f", nccl backend {versions.get('nccl_available')}, gloo {versions.get('gloo_available')}",
        )
    )
    if gpu:
        out.lines.append(
            (
                "gpu",
                f"{gpu.get('name')} sm{''.join(map(str, gpu.get('capability') or []))}, "
                f"{gpu.get('memory_gib')} GiB, bf16 native {gpu.get('bf16_native')}, "
                f"archs {gpu.get('arch_list')}",
            )
        )
    agent = data.get("agent") or {}
    out.lines.append(
        (
            "agent",
            f"imports ok {agent.get('imports_ok')}, forbidden modules "
            f"{agent.get('forbidden_modules')}"
            + (
                f", error: {str(agent.get('error')).strip().splitlines()[-1]}"
                if agent.get("error")
                else ""
            ),
        )
    )
    out.check(bool(agent.get("ok")), "the trace agent imports with torch alone (no pydantic)")
    if mode.get("mode") == "gpu":
        out.check(bool(versions.get("cuda_available")), "CUDA available")
    out.top = f"torch {versions.get('torch')}"


def env_line(folder: Path) -> str | None:
    record = read_json(folder / "env" / "rank0.json")
    if not isinstance(record, dict) or not isinstance(record.get("result"), dict):
        return None
    res = record["result"]
    v = res.get("versions") or {}
    gpu = res.get("gpu") or {}
    text = (
        f"backend {res.get('backend')}, world {res.get('world_size')}, device "
        f"{record.get('device')}; torch {v.get('torch')}, CUDA {v.get('cuda')}, cuDNN "
        f"{v.get('cudnn')}, NCCL {v.get('nccl')}"
    )
    if gpu:
        text += (
            f"; GPU {gpu.get('name')} sm{''.join(map(str, gpu.get('capability') or []))} "
            f"bf16 native={gpu.get('bf16_native')} torch_says={gpu.get('bf16_torch_says')} "
            f"matmul={gpu.get('bf16_matmul_works')}"
        )
    return text


def probe_statuses(folder: Path) -> str:
    parts = []
    for probe_dir in sorted(p for p in folder.iterdir() if p.is_dir() and p.name != "status"):
        states = []
        for path in sorted(probe_dir.glob("rank*.json")):
            record = read_json(path)
            states.append(record.get("status", "?") if isinstance(record, dict) else "damaged")
        parts.append(f"{probe_dir.name}:{','.join(states) or 'none'}")
    return " ".join(parts)


def read_probes(reader: Reader, root: Path, step: Step, mode: dict[str, str], out: Outcome) -> None:
    folder = root / step.name
    if not folder.is_dir():
        out.lines.append(("result", "no results folder"))
        out.check(False, "probe results written")
        return
    env = env_line(folder)
    if env:
        out.lines.append(("env", env))
    if step.name == "probes_1rank" and mode.get("single_rank_backend"):
        record = read_json(folder / "env" / "rank0.json")
        got = record.get("backend") if isinstance(record, dict) else None
        want = mode["single_rank_backend"]
        out.check(got == want, f"the probes ran on {want} (got {got})")
    out.lines.append(("probes", probe_statuses(folder)))
    read = read_results(reader, "probes", folder, ENV_FACTS + PROBE_FACTS, out)
    if read is None:
        return
    got, diagnosis, facts = read
    out.check(not got.failed, "every probe ran (no probe failed)")
    for fact in ("allreduce_correct", "param_checksums_match", "scaler_state_match"):
        out.check(*fact_is(facts, fact, True))
    if mode.get("mode") == "gpu":
        out.check(*fact_is(facts, "gpu_supports_bf16", True))
    out.check(*healthy(diagnosis))
    out.top = top_text(diagnosis)


def read_results(
    reader: Reader, kind: str, folder: Path, shown: Any, out: Outcome
) -> tuple[Any, Any, dict[str, Any]] | None:
    """Diagnose a probe or trace folder with the project's readers and add its facts, top
    causes and first warnings to ``out``; None (and a failed check) when it cannot be read."""
    try:
        got, diagnosis = reader.diagnose(kind, folder)
    except reader.input_error as exc:
        out.lines.append(("result", f"unreadable: {one_line(exc)}"))
        out.check(False, f"{kind} results readable")
        return None
    facts = facts_of(diagnosis)
    out.lines.append(("facts", facts_line(reader, facts, shown)))
    out.lines.append(("causes", causes_text(diagnosis)))
    for warning in got.warnings[:4]:
        out.lines.append(("warning", warning[:200]))
    return got, diagnosis, facts


def read_selftest(root: Path, step: Step, mode: dict[str, str], out: Outcome) -> None:
    records = [read_json(p) for p in sorted((root / step.name).glob("rank*.json"))]
    good = [r for r in records if isinstance(r, dict) and isinstance(r.get("selftest"), dict)]
    if not good:
        out.lines.append(("result", "no per-rank result"))
        out.check(False, "selftest results written")
        return
    first = good[0]
    cases = first["selftest"].get("cases") or []
    wrong = [c for r in good for c in r["selftest"].get("cases") or [] if c.get("ok") is False]
    unsupported = [c for c in cases if c.get("ok") is None]
    out.lines.append(
        (
            "selftest",
            f"{first.get('backend')} on {first.get('device')} ({first.get('gpu')}), "
            f"{len(good)} rank(s), {len(cases)} cases: {len(wrong)} wrong, "
            f"{len(unsupported)} unsupported",
        )
    )
    for case in unsupported[:4]:
        out.lines.append(
            (
                "unsupported",
                f"{case.get('op')} {case.get('dtype')} n={case.get('n')}: {case.get('error')}",
            )
        )
    for case in wrong[:4]:
        out.lines.append(
            (
                "wrong",
                f"{case.get('op')} {case.get('dtype')} n={case.get('n')} err={case.get('max_abs_err')}",
            )
        )
    if mode.get("mode") == "gpu":
        device = str(first.get("device"))
        out.check(device.startswith("cuda"), f"the collectives ran on CUDA tensors ({device})")
    out.check(not wrong, "every known-answer collective exact on every rank")
    out.top = f"{len(wrong)} wrong / {len(unsupported)} unsupported"


def job_line(root: Path, step: Step) -> str | None:
    record = read_json(root / step.name / "job" / "rank0.json")
    if not isinstance(record, dict):
        return None
    train = record.get("train") if isinstance(record.get("train"), dict) else {}

    def num(x: Any) -> str:
        return f"{x:.4g}" if isinstance(x, (int, float)) else str(x)

    text = (
        f"{record.get('world_size')} rank(s) {record.get('backend')} on {record.get('device')} "
        f"({record.get('gpu') or 'cpu'}), amp {record.get('amp')}, scaler {record.get('scaler')}, "
        f"clip {record.get('clip')}, sampler {record.get('sampler')}"
    )
    if train:
        text += (
            f"; {train.get('steps')} steps in {num(train.get('seconds'))}s, loss "
            f"{num(train.get('loss_first'))} -> {num(train.get('loss_last'))}, clip norm "
            f"{num(train.get('clip_norm_first'))} -> {num(train.get('clip_norm_last'))}, "
            f"scale {num(train.get('scale_last'))}"
        )
    if record.get("error"):
        text += f"; ERROR {record['error']}"
    return text


# step name -> (the facts that must hold, the cause that must rank first or None: healthy)
TRACE_EXPECT: dict[str, tuple[dict[str, Any], str | None]] = {
    "trace_a_1rank_bf16": ({"precision": "bf16_amp"}, None),
    "trace_b_fp16_scaler_ok": (
        {"precision": "fp16_amp", "uses_grad_scaler": True, "unscale_before_clip": True},
        None,
    ),
    "trace_c_clip_before_unscale": (
        {"uses_grad_scaler": True, "unscale_before_clip": False},
        "clip-before-unscale",
    ),
    "trace_d_no_sampler": ({"batches_duplicated_across_ranks": True}, "no-distributed-sampler"),
    "trace_e_rank0_load": ({"param_checksums_match": False}, "checkpoint-loaded-on-rank0-only"),
}


def read_traced(reader: Reader, root: Path, step: Step, mode: dict[str, str], out: Outcome) -> None:
    job = job_line(root, step)
    if job:
        out.lines.append(("job", job))
    if mode.get("mode") == "gpu":
        record = read_json(root / step.name / "job" / "rank0.json")
        device = record.get("device") if isinstance(record, dict) else None
        out.check(str(device).startswith("cuda"), f"the job ran on CUDA (device {device})")
    folder = root / step.name / "trace"
    if not folder.is_dir():
        out.lines.append(("result", "no trace folder"))
        out.check(False, "trace written")
        return
    read = read_results(reader, "trace", folder, TRACE_FACTS, out)
    if read is None:
        return
    got, diagnosis, facts = read
    out.check(not got.failed, "the traced run did not fail")
    off = [w for w in got.warnings if "switched off" in w]
    out.check(not off, f"the agent recorded every part ({len(off)} part(s) switched off)")
    if isinstance(facts.get("world_size"), int) and facts["world_size"] >= 2:
        out.check("param_checksums_match" in facts, "the replicas' checksums were compared")
    want_facts, want_first = TRACE_EXPECT.get(step.name, ({}, None))
    for fact, value in want_facts.items():
        out.check(*fact_is(facts, fact, value))
    out.check(*(first_is(diagnosis, want_first) if want_first else healthy(diagnosis)))
    out.top = top_text(diagnosis)


def top_text(diagnosis: Any) -> str:
    causes = top_causes(diagnosis, 1)
    return f"{causes[0][0]} {causes[0][1]:.3f}" if causes else "-"


# ---------------------------------------------------------------- report


def read_nvidia_smi(root: Path, out: Outcome) -> None:
    with contextlib.suppress(OSError):
        text = (root / "nvidia-smi.txt").read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            if any(key in line for key in NVIDIA_SMI_KEYS):
                out.lines.append(("nvidia-smi", " ".join(line.strip("|").split())[:160]))
            if len(out.lines) >= len(NVIDIA_SMI_KEYS):
                break


def report(root: Path, make_reader: Callable[[], Reader]) -> str:
    steps = read_steps(root)
    mode = read_mode(root)
    reader = make_reader()
    lines = [
        f"gpu_check results in {root}: mode {mode.get('mode', '?')}, device "
        f"{mode.get('device', '?')}, single-rank backend {mode.get('single_rank_backend', '?')}",
        "",
    ]
    rows: list[tuple[str, str, str, str, str]] = []
    for step in steps.values():
        out = Outcome()
        if step.rc == "skip":
            out.lines.append(("skipped", step.note))
            out.skipped = True
        elif step.name == "nvidia_smi":
            read_nvidia_smi(root, out)
        elif step.name == "preflight":
            read_preflight(root, mode, out)
        elif step.name.startswith("probes_"):
            read_probes(reader, root, step, mode, out)
        elif step.name.startswith("selftest_"):
            read_selftest(root, step, mode, out)
        elif step.name.startswith("trace_"):
            read_traced(reader, root, step, mode, out)
        if step.rc not in ("0", "skip"):
            out.check(False, f"exit code 0 (got {step.rc}: {step.note})")
        elif step.rc == "0":
            out.check(True, "exit code 0")
        lines.append(
            f"== {step.name}  rc={step.rc}  {step.seconds}s (timeout {step.timeout}s)  "
            f"{out.verdict}"
        )
        lines += [f"   {label:<11} {text}" for label, text in out.lines]
        lines += [f"   {'expect':<11} {'ok  ' if ok else 'FAIL'} {text}" for ok, text in out.checks]
        lines.append("")
        rows.append((step.name, step.rc, step.seconds, out.top, out.verdict))
    widths = [max(len(r[i]) for r in [*rows, HEADER]) for i in range(5)]
    table = [HEADER, *rows]
    lines.append("summary")
    for i, row in enumerate(table):
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    failed = sum(1 for r in rows if r[4].startswith("FAIL"))
    lines.append("")
    lines.append(
        f"{len(rows)} steps, {failed} with failed expectations"
        if failed
        else f"{len(rows)} steps, every expectation met"
    )
    return "\n".join(lines)


HEADER = ("step", "rc", "sec", "first cause / result", "expectations")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="gpu_check.tar.gz, or the folder it unpacks to")
    args = parser.parse_args(argv)
    try:
        with opened(args.path) as root:
            text = report(root, Reader)
    except BadInput as exc:
        sys.stderr.write(f"read.py: {exc}\n")
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
