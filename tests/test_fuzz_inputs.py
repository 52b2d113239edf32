"""Property-based fuzzing of what a user hands ddpadvisor: answers files, --set values, rule
folders, training scripts and whole command lines.

Whatever the input, the CLI exits 0 or 2 (never 1, never a traceback), prints either one JSON
document or nothing on stdout, and an error is one line on stderr. Hypothesis' deadline bounds
each case (10 s). Probe and trace folders are fuzzed beside their readers.
"""

from __future__ import annotations

import io
import json
import string
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpadvisor.cli import main

FACTS = [
    "single_gpu_converges",
    "loss_pattern",
    "precision",
    "grad_accum_steps",
    "global_batch_ratio",
    "torch_version",
    "uses_distributed_sampler",
    "warmup_steps",
    "not_a_fact",
]
SETTINGS = settings(
    max_examples=40,
    deadline=10_000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["unknown", "是", "否", "震荡", "nan", "inf", "1e400", "-0", "fp16_amp"]),
)
values = st.recursive(
    scalars,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "fuzz-cache"))
    monkeypatch.setenv("DDPADVISOR_NO_USER_KB", "1")


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check(code: int, out: str, err: str, *, listing: bool = False) -> None:
    """``listing``: `kb validate` names every problem, one line each, then a summary."""
    assert code in (0, 2), f"exit {code}: {err}"
    assert "Traceback" not in err and "internal error" not in err
    if code == 0 and out.startswith("{"):
        json.loads(out)  # exactly one JSON document
    if code == 2 and not listing:
        assert out == ""
        assert len(err.strip().splitlines()) == 1, err


@SETTINGS
@given(answers=st.dictionaries(st.sampled_from(FACTS), values, max_size=5), as_json=st.booleans())
def test_answers_files(tmp_path: Path, answers: dict[str, object], as_json: bool) -> None:
    path = tmp_path / ("a.json" if as_json else "a.yaml")
    try:
        path.write_text(json.dumps(answers) if as_json else yaml.safe_dump(answers))
    except (ValueError, yaml.YAMLError):
        return  # not representable in that format
    check(*run(["--json", "--answers", str(path)]))


@SETTINGS
@given(raw=st.binary(max_size=300))
def test_answers_files_of_arbitrary_bytes(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "a.yaml"
    path.write_bytes(raw)
    check(*run(["--json", "--answers", str(path)]))


@SETTINGS
@given(fact=st.sampled_from(FACTS), value=st.text(max_size=40))
def test_set_values(fact: str, value: str) -> None:
    check(*run(["--json", "--set", f"{fact}={value}"]))


@SETTINGS
@given(
    argv=st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "--json",
                    "--set",
                    "--answers",
                    "--script",
                    "--kb",
                    "--top",
                    "--lang",
                    "report",
                    "kb",
                    "validate",
                    "test",
                    "claims",
                    "schema",
                    "--",
                    "-x",
                    "zh",
                    "0",
                    "-1",
                ]
            ),
            st.text(alphabet=string.printable, max_size=12),
        ),
        max_size=6,
    )
)
def test_command_lines(argv: list[str]) -> None:
    if not argv or argv[0] not in ("--json", "report", "kb", "claims", "schema"):
        argv = ["--json", *argv]  # never the TUI, trace or probe launches here
    if argv[0] == "kb" and argv[1:2] == ["graph"]:
        return
    try:
        code, _out, err = run(argv)
    except SystemExit as exc:  # argparse's own exit for --help
        code, err = int(exc.code or 0), ""
    assert code in (0, 1, 2) if argv[:2] == ["kb", "test"] else code in (0, 2), (argv, err)
    assert "Traceback" not in err


RULE_FIELDS = {
    "id": st.one_of(st.text(max_size=12), st.lists(st.text(max_size=3), max_size=2), st.integers()),
    "title": st.text(max_size=10),
    "area": st.sampled_from(["data", ""]),
    "prior": st.one_of(st.sampled_from(["common", "rare", "bogus"]), st.floats(), st.integers()),
    "mechanism": st.text(max_size=10),
    "evidence": st.lists(
        st.fixed_dictionaries(
            {
                "fact": st.sampled_from(FACTS),
                "is": scalars,
                "strength": st.sampled_from(["strong", "x"]),
            }
        ),
        max_size=2,
    ),
    "override": st.sampled_from(["replace", "append", "nope"]),
    "zh": st.dictionaries(st.sampled_from(["title", "mechanism", "oops"]), st.text(max_size=5)),
}


@SETTINGS
@given(
    cause=st.fixed_dictionaries({}, optional=RULE_FIELDS),
    section=st.sampled_from(["causes", "facts", "fixes", "claims", "tests", "mechanisms", "bogus"]),
)
def test_rule_folders(tmp_path: Path, cause: dict[str, object], section: str) -> None:
    folder = tmp_path / "rules"
    folder.mkdir(exist_ok=True)
    try:
        (folder / "r.yaml").write_text(yaml.safe_dump({section: [cause]}))
    except (ValueError, yaml.YAMLError):
        return
    check(*run(["kb", "validate", "--kb", str(folder)]), listing=True)
    check(*run(["--json", "--kb", str(folder)]))


@SETTINGS
@given(
    lines=st.lists(
        st.sampled_from(
            [
                "import torch",
                "model = torch.nn.parallel.DistributedDataParallel(model)",
                "for x in loader:",
                "    loss = model(x).sum() / 4",
                "    loss.backward()",
                "    if step % 4: continue",
                "    optimizer.step()",
                "x = (" + "1 + " * 1500 + "1)",
                "def f(:",
                "sampler = DistributedSampler(ds, seed=rank)",
                "\udcff",
            ]
        ),
        max_size=8,
    )
)
def test_scripts(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "train.py"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    check(*run(["--json", "--script", str(path)]))
