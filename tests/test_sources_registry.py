"""The registry of evidence sources: one declaration per source, read by gather, the CLI's
flags, the engine's precedence table and the TUI."""

from __future__ import annotations

from pathlib import Path

from ddpadvisor.cli import _diagnose_parser
from ddpadvisor.evidence.gather import Sources
from ddpadvisor.evidence.sources import ORDER, by_kind, precedence
from ddpadvisor.evidence.sources.rankfiles import is_trace_file, rank_files, rank_of
from ddpadvisor.observation import PRECEDENCE


def test_engine_precedence_is_the_registry_s() -> None:
    declared = precedence()
    assert {k: PRECEDENCE[k] for k in declared} == declared
    # measured > the run's own files > scanned > --set > answers
    assert declared["trace"] == declared["probe"] > declared["log"] > declared["script"]
    assert declared["script"] > declared["set"]
    assert set(declared) == set(PRECEDENCE)  # every observation source has a source module
    assert declared["set"] > declared["answer"]


def test_every_source_has_a_field_a_flag_and_a_reader() -> None:
    fields = set(Sources.__dataclass_fields__)
    names = [s.name for s in ORDER]
    assert len(names) == len(set(names))
    for source in ORDER:
        assert source.field in fields, source.name
        assert source.flags and callable(source.read)


def test_the_cli_flags_come_from_the_registry(tmp_path: Path) -> None:
    argv = []
    for source in ORDER:
        for flag in source.flags:
            argv += [flag.name, "x=1" if not flag.path else str(tmp_path / source.name)]
    args = _diagnose_parser().parse_args(argv)
    for source in ORDER:
        got = getattr(args, source.field)
        assert len(got) == len(source.flags), source.name
        assert all(isinstance(v, Path) == source.flags[0].path for v in got)


def test_the_tui_kinds_name_sources() -> None:
    probe, trace = by_kind("probe"), by_kind("trace")
    assert probe is not None and probe.rows is not None
    assert trace is not None and trace.series is not None and trace.rows is not None
    assert by_kind("no-such-kind") is None


def test_rank_file_names(tmp_path: Path) -> None:
    assert rank_of("rank12.jsonl", "jsonl") == 12
    assert rank_of("rank012.jsonl", "jsonl") is None  # the agent never writes a leading zero
    assert rank_of("rank1.json", "jsonl") is None and rank_of("rank1.jsonl.bak", "jsonl") is None
    for name in ("rank3.jsonl", "rank10.jsonl", "rank2.progress", "notes.jsonl"):
        (tmp_path / name).write_text("")
    assert [r for r, _ in rank_files(tmp_path, "jsonl")] == [3, 10]
    assert is_trace_file("rank0.progress.tmp") and is_trace_file("meta.json")
    assert not is_trace_file("train.py") and not is_trace_file("rank0.json")
