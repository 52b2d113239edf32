"""bench/interview_blind.py: blind cases load with their mapped causes, and the replay follows
the tool's own next steps, declining what a person with only a post cannot do."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ddpadvisor.engine.diagnose import Engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import interview_blind as ib


def test_every_blind_case_maps_to_a_corpus_cause_and_a_split() -> None:
    cases = ib.load_cases()
    assert len(cases) >= 60
    assert {c.split for c in cases} == {"tuned", "heldout"}
    assert all(c.post.strip() and c.cause for c in cases)


def test_a_malformed_blind_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "005.yaml").write_text("post: [unclosed\n", encoding="utf-8")
    with pytest.raises(ib.CaseProblem, match=r"005.yaml:\d+: not valid YAML"):
        ib.load_cases(tmp_path)


def test_replay_declines_scan_and_probe_for_a_person_with_a_post(
    engine: Engine, tmp_path: Path
) -> None:
    (tmp_path / "004.yaml").write_text(
        "post: |-\n  DDP on 4 GPUs, the loss oscillates far more than on one GPU.\n"
        "answers:\n  single_gpu_converges: true\n",
        encoding="utf-8",
    )
    case = ib.load_cases(tmp_path)[0]
    out = ib.replay(engine, case, max_steps=8)
    assert len(out.steps) <= 8 and out.steps
    assert not [s for s in out.steps if s.startswith(("scan", "trace")) and "declined" not in s]
    declines = [s for s in out.steps if "--without" in s]
    assert len(declines) == len(set(declines)), "a declined need is never offered again"


def test_the_attach_step_reads_the_reporters_files_or_is_declined(
    engine: Engine, tmp_path: Path
) -> None:
    (tmp_path / "004.yaml").write_text(
        "post: |-\n  Training on several GPUs, the loss goes NaN after a while.\n",
        encoding="utf-8",
    )
    case = ib.load_cases(tmp_path)[0]
    log = "".join(f"step {i} loss {4.0 - i * 0.01:.3f}\n" for i in range(40))
    log += "".join(f"step {i} loss nan\n" for i in range(40, 60))
    log += "world_size: 4\n"
    read = ib.replay(engine, case, max_steps=8, files=log)
    declined = ib.replay(engine, case, max_steps=8, files="")
    attach = [s for s in read.steps if s.startswith("attach")]
    assert attach and "from the pasted text" in attach[0]
    assert [s for s in declined.steps if s.startswith("attach")] == [
        "attach: declined (--set attach=unknown)"
    ]
