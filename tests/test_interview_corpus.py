"""The interview corpus (bench/interview_corpus): every case is well-formed against the KB."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from ddpadvisor.observation import observe
from ddpadvisor.service import load_engine
from tests.support.bench_module import load_bench

ROOT = Path(__file__).resolve().parent.parent
URL = re.compile(
    r"^https://(github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+"
    r"|discuss\.pytorch\.org/t/[\w-]+/\d+(/\d+)?"
    r"|discuss\.huggingface\.co/t/[\w-]+/\d+(/\d+)?)$"
)


bench = load_bench("interview")
CASES = bench.load_cases()


@pytest.fixture(scope="module")
def kb():  # type: ignore[no-untyped-def]
    return load_engine().kb


def test_corpus_size_and_held_out_third() -> None:
    assert len(CASES) >= 30
    held = sum(c.split == "heldout" for c in CASES)
    assert 0.28 <= held / len(CASES) <= 0.40


def test_split_follows_the_rule_fixed_at_collection() -> None:
    # Every third case in the order found (the file's number) is held out; nobody moves one.
    for case in CASES:
        number = int(case.name.split("-", 1)[0])
        assert case.split == ("heldout" if number % 3 == 0 else "tuned"), case.name


def test_urls_are_public_threads_and_unique() -> None:
    urls = [c.url for c in CASES]
    assert len(set(urls)) == len(urls)
    for case in CASES:
        assert URL.match(case.url), f"{case.name}: {case.url}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_fits_the_kb(case, kb) -> None:  # type: ignore[no-untyped-def]
    if case.cause == bench.CATCH_ALL:
        assert case.cause_note, "a case resolved to 'other' says why no cause fits"
    else:
        assert case.cause in kb.causes
    for fact, value in case.answers.items():
        assert observe(kb, fact, value, "answer", case.name) is not None, fact
    for fact, value in case.measured.items():
        assert observe(kb, fact, value, "probe", case.name) is not None, fact
        assert {"probe", "trace"} & set(kb.facts[fact].sources), f"{fact} is not measured"
    recorded = set(case.answers) | set(case.measured)
    for fact in case.reviewed_unknown:
        assert fact in kb.facts, fact
        assert fact not in recorded, f"{fact} is both recorded and reviewed-unknown"
    assert case.resolution not in case.narrative


def test_loader_names_the_file_and_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "01-bad.yaml"
    bad.write_text("url: https://github.com/a/b/issues/1\ntitle: t\n", encoding="utf-8")
    with pytest.raises(bench.CorpusProblem, match=r"01-bad\.yaml: missing field\(s\) narrative"):
        bench.load_cases(tmp_path)
    bad.write_text("title: [unclosed\n", encoding="utf-8")
    with pytest.raises(bench.CorpusProblem, match=r"01-bad\.yaml:\d+: not valid YAML"):
        bench.load_cases(tmp_path)


def test_replay_never_takes_a_declined_fact_twice(kb) -> None:  # type: ignore[no-untyped-def]
    engine = load_engine()
    case = bench.Case(
        path=Path("00-synthetic.yaml"),
        url="https://github.com/a/b/issues/1",
        title="t",
        narrative="n",
        resolution="r",
        cause="no-distributed-sampler",
        split="tuned",
        answers={"uses_distributed_sampler": False},
    )
    result = bench.replay(engine, case, 8, None)
    facts = [fact for _, fact, _ in result.steps]
    assert len(facts) == len(set(facts))
    # A probe, trace or scan step names several facts ("a,b"); nothing is reviewed here, so every
    # fact of a declined step that only a measurement settles is listed as unrecorded, and only
    # facts some step named are, except one whose answer is recorded (a scan the thread did not
    # run still leaves it reviewed). A declined step's askable facts can still be asked: they
    # count when a question takes them.
    declined = [
        f
        for kind, label, outcome in result.steps
        if outcome == "declined"
        for f in label.split(",")
        if f not in case.answers and (kind == "ask" or "asked" not in kb.facts[f].sources)
    ]
    named = {f for _, label, _ in result.steps for f in label.split(",")}
    assert set(declined) <= set(result.unrecorded) <= named
    assert not set(case.answers) & set(result.unrecorded)
    assert len(result.unrecorded) == len(set(result.unrecorded))


def test_a_declined_scan_leaves_its_questions_askable(kb) -> None:  # type: ignore[no-untyped-def]
    """Declining "scan your script" declines the step, not what the user knows: a fact the scan
    would have read and the user can answer is still asked afterwards, and the step is not
    offered again."""
    case = _case(
        cause="sampler-set-epoch-missing", answers={"precision": "fp32", "hand_written_loop": True}
    )
    steps = bench.replay(load_engine(), case, 12, None).steps
    scans = [i for i, (kind, _, _) in enumerate(steps) if kind == "scan"]
    assert len(scans) == 1 and steps[scans[0]][2] == "declined"
    scanned = set(steps[scans[0]][1].split(","))
    later = [(label, outcome) for kind, label, outcome in steps[scans[0] + 1 :] if kind == "ask"]
    assert {"precision", "hand_written_loop"} <= scanned
    assert ("precision", "answered") in later and ("hand_written_loop", "answered") in later


def _case(**over):  # type: ignore[no-untyped-def]
    fields = {
        "path": Path("00-synthetic.yaml"),
        "url": "https://github.com/a/b/issues/1",
        "title": "t",
        "narrative": "n",
        "resolution": "r",
        "cause": "no-distributed-sampler",
        "split": "tuned",
        "answers": {"uses_distributed_sampler": False, "world_size": 4},
    }
    fields.update(over)
    return bench.Case(**fields)


def test_intake_facts_are_confirmed_corrected_or_rejected() -> None:
    engine = load_engine()
    said = {"uses_distributed_sampler": False, "world_size": 2, "uses_lora": True}

    def extract(kb, text):  # type: ignore[no-untyped-def]
        return [SimpleNamespace(fact=f, value=v, phrase=text) for f, v in said.items()]

    result = bench.replay(engine, _case(), 0, extract)
    assert result.intake_counts == {"confirmed": 1, "corrected": 1, "rejected": 1, "from code": 0}
    assert "world_size=2 (corrected)" in result.intake_facts
    assert result.unrecorded == ["uses_lora"]  # rejected and never reviewed: flagged


def test_facts_read_from_pasted_code_stand_without_a_recorded_answer() -> None:
    engine = load_engine()

    def extract(kb, text):  # type: ignore[no-untyped-def]
        assert "```python" in text  # the case's code is pasted with its intake
        return [
            SimpleNamespace(fact="uses_lora", value=True, phrase="x", origin="code"),
            SimpleNamespace(fact="world_size", value=2, phrase="x", origin="code"),
        ]

    result = bench.replay(engine, _case(code="model = DDP(model)\n"), 0, extract)
    # recorded world_size=4 corrects the code's reading; uses_lora, unrecorded, is taken as read
    assert result.intake_counts == {"confirmed": 0, "corrected": 1, "rejected": 0, "from code": 1}
    assert "uses_lora=True (from code)" in result.intake_facts
    plain = bench.replay(engine, _case(), 0, lambda kb, text: [])
    assert plain.intake_facts == []


class _StepEngine:
    """An engine whose diagnosis offers next_steps: one trace step naming two facts, then an ask."""

    def __init__(self, kb):  # type: ignore[no-untyped-def]
        self.kb = kb
        self.calls: list[set[str]] = []

    def diagnose(self, observations, declined=frozenset()):  # type: ignore[no-untyped-def]
        self.calls.append(set(declined))
        seen = {o.fact for o in observations}
        cause = SimpleNamespace(id="no-distributed-sampler", rank=1 if seen else 2)
        steps = [
            SimpleNamespace(kind="trace", facts=["sampler_shards_overlap", "world_size"]),
            SimpleNamespace(kind="ask", fact="uses_lora"),
        ]
        return SimpleNamespace(causes=[cause], next_steps=steps, next_questions=[])


def test_next_steps_are_preferred_and_declined_facts_passed_on(kb, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ddpadvisor.report import present

    def stub_diagnose(engine, observations, *, declined=(), resemblance=()):  # type: ignore[no-untyped-def]
        return engine.diagnose(observations, declined=declined)

    monkeypatch.setattr(present, "diagnose", stub_diagnose)  # the replay presents through it
    engine = _StepEngine(kb)
    case = _case(measured={"sampler_shards_overlap": True})
    result = bench.replay(engine, case, 8, None)
    assert result.steps[0] == ("trace", "sampler_shards_overlap,world_size", "answered")
    assert result.steps[1] == ("ask", "uses_lora", "declined")
    assert result.first_at == 1
    assert "uses_lora" in engine.calls[-1]  # the engine is told what was declined
    assert result.stuck  # everything offered has been taken, budget left over


def test_bad_corpus_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert bench.main(["--corpus", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "no case files" in err and "\n" not in err
    (tmp_path / "01-x.yaml").write_text(
        "url: https://github.com/a/b/issues/1\ntitle: t\nnarrative: n\nresolution: r\n"
        "cause: no-such-cause\nsplit: tuned\nanswers: {}\n",
        encoding="utf-8",
    )
    assert bench.main(["--corpus", str(tmp_path)]) == 2
    assert "cause 'no-such-cause' is not in the KB" in capsys.readouterr().err


def test_numbers_replays_one_collection_batch(capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    assert bench.main(["--numbers", "4-6", "--steps", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    numbers = sorted(int(c["case"].split("-", 1)[0]) for c in doc["cases"])
    assert numbers == [4, 5, 6]
    assert doc["splits"]["heldout"]["cases"] == 1  # 6 is held out, 4 and 5 are tuned
    verdicts = {"cause", "undecided", "nothing-fits", "looks-healthy"}
    assert all(c["verdict"] in verdicts for c in doc["cases"])
    assert bench.main(["--numbers", "900-901"]) == 2
    assert "no case numbered 900 to 901" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        bench.main(["--numbers", "9-4"])
    assert bad.value.code == 2


_TRAIN = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from helpers import make_model, make_data

dist.init_process_group("gloo")
model = DDP(make_model())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(make_data(), batch_size=8, shuffle=True)
for x, y in loader:
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""


def _git(*args: str, cwd: Path) -> str:
    import subprocess

    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _mirror(tmp_path: Path) -> tuple[Path, str]:
    """A bare mirror of owner/name whose first commit has a sampler-less DDP loop."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src/train.py").write_text(_TRAIN, encoding="utf-8")
    (work / "src/helpers.py").write_text("def make_model(): ...\n", encoding="utf-8")
    (work / "src/data.bin").write_bytes(b"\0" * 64)
    _git("init", "-q", cwd=work)
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "before", cwd=work)
    before = _git("rev-parse", "HEAD", cwd=work)
    (work / "src/train.py").write_text("print('fixed')\n", encoding="utf-8")
    _git("commit", "-q", "-am", "after", cwd=work)
    mirrors = tmp_path / "mirrors"
    _git("clone", "-q", "--bare", str(work), str(mirrors / "owner+name/repo"), cwd=tmp_path)
    return mirrors, before


def test_script_is_read_from_its_mirror_at_the_commit_recorded(tmp_path: Path) -> None:
    mirrors, before = _mirror(tmp_path)
    ref = bench.ScriptRef("owner/name", before, "src/train.py")
    cache = tmp_path / "cache"
    path = bench.script_file(ref, mirrors, cache)
    assert path is not None and path.read_text(encoding="utf-8") == _TRAIN  # not the later fix
    assert (path.parent / "helpers.py").is_file()  # its sibling imports come along
    assert not (path.parent / "data.bin").exists()  # only Python files
    shutil.rmtree(mirrors)
    assert bench.script_file(ref, mirrors, cache) == path  # read once, then from the cache
    missing = bench.ScriptRef("owner/other", before, "src/train.py")
    assert bench.script_file(missing, mirrors, cache) is None


def test_script_field_is_none_or_a_full_reference(tmp_path: Path) -> None:
    base = (
        "url: https://github.com/a/b/issues/1\ntitle: t\nnarrative: n\nresolution: r\n"
        "cause: other\nsplit: tuned\nanswers: {}\n"
    )
    case = tmp_path / "01-x.yaml"
    case.write_text(base + "script: none\nscript_note: private code\n", encoding="utf-8")
    assert bench.load_case(case).script is None
    good = "script: {repo: a/b, commit: " + "a" * 40 + ", path: t/train.py}\n"
    case.write_text(base + good, encoding="utf-8")
    assert bench.load_case(case).script == bench.ScriptRef("a/b", "a" * 40, "t/train.py")
    for bad, why in (
        ("script: {repo: a/b, commit: abc, path: train.py}", "40 lowercase hex"),
        ("script: {repo: a/b, commit: " + "a" * 40 + ", path: ../x.py}", "inside the repo"),
        ("script: train.py", "'none' or a mapping"),
    ):
        case.write_text(base + bad + "\n", encoding="utf-8")
        with pytest.raises(bench.CorpusProblem, match=why):
            bench.load_case(case)


def _reporters_script(tmp_path: Path) -> Path:
    """The mirror's pre-fix train.py (no DistributedSampler), read through the bench's cache."""
    mirrors, before = _mirror(tmp_path)
    path = bench.script_file(
        bench.ScriptRef("owner/name", before, "src/train.py"), mirrors, tmp_path / "cache"
    )
    assert path is not None
    return path


def test_a_scan_step_runs_the_scanner_on_the_reporters_script(tmp_path: Path) -> None:
    path = _reporters_script(tmp_path)
    engine = load_engine()
    case = _case(answers={"world_size": 4})  # the reporter cannot say whether a sampler is used
    without = bench.replay(engine, case, 8, None)
    scanned = bench.replay(engine, case, 8, None, script=path)
    assert not any(k in bench.SCAN_KINDS and o == "answered" for k, _, o in without.steps)
    assert any(k in bench.SCAN_KINDS and o == "answered" for k, _, o in scanned.steps)
    assert scanned.rank_final == 1  # the scan reads the missing DistributedSampler
    assert without.rank_final > 1


def test_script_first_scans_before_any_question_and_counts_as_a_step(tmp_path: Path) -> None:
    path = _reporters_script(tmp_path)
    engine = load_engine()
    case = _case(answers={"world_size": 4})
    first = bench.replay(engine, case, 8, None, script=path, script_first=True)
    assert first.steps[0] == ("script", "the launched script", "answered")
    assert first.first_at == 1  # the scan alone puts the missing sampler first
    # without a script on disk the mode changes nothing
    plain = bench.replay(engine, case, 8, None, script_first=True)
    assert plain.steps == bench.replay(engine, case, 8, None).steps


def test_every_answer_counts_from_the_start() -> None:
    engine = load_engine()

    def extract(kb, text):  # type: ignore[no-untyped-def]
        return [SimpleNamespace(fact="world_size", value=2, phrase="x", origin="code")]

    case = _case(answers={"uses_distributed_sampler": False}, measured={"world_size": 8})
    asked = bench.replay(engine, case, 0, extract)
    every = bench.replay(engine, case, 0, extract, every_answer=True)
    assert every.steps == [] and asked.steps == []
    # the sampler answer, never asked in zero steps, now moves the true cause up
    assert every.rank_final < asked.rank_final
