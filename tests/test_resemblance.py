"""A description that reads like a cause's account counts as evidence for it (kb/resemblance.py),
and the output says which words matched."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ddpadvisor.engine.diagnose import DESCRIPTION, Engine
from ddpadvisor.kb import levels
from ddpadvisor.kb.resemblance import Resemblance, account, index_for, resemble, statements
from ddpadvisor.kb.terms import terms
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import diagnose
from ddpadvisor.service import load_engine
from tests.test_scan_inputs import run_cli

# Our own sentences, one per cause, as a user who found the slip would put it.
DESCRIBED = [
    (
        "we wrap the loader in a DistributedSampler but never call sampler.set_epoch, so the "
        "shuffled order is the same every epoch",
        "sampler-set-epoch-missing",
    ),
    (
        "clip_grad_norm_ runs on the scaled gradients before scaler.unscale_, so the clip "
        "threshold is compared with values multiplied by the loss scale",
        "clip-before-unscale",
    ),
    (
        "the forward pass goes through model.module instead of the DDP wrapper, so gradients "
        "are never all-reduced and each GPU trains its own copy",
        "ddp-wrapper-bypassed",
    ),
    (
        "optimizer.zero_grad() is called on every micro-batch inside the gradient accumulation "
        "loop, which throws away the earlier micro-batches",
        "zero-grad-inside-accumulation",
    ),
    (
        "V100 has no bf16 so we train LLaMA in fp16 mixed precision and the loss jumps to "
        "tens and then NaN after the loss scale overflows",
        "fp16-on-hardware-without-bf16",
    ),
]
DESCRIBED_ZH = [
    ("用了 DistributedSampler，但是每个 epoch 开始前没有调用 set_epoch，数据顺序每轮都一样", "sampler-set-epoch-missing"),
    ("前向直接调用 model.module，绕过了 DDP 包装，梯度没有同步", "ddp-wrapper-bypassed"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "cause"), DESCRIBED + DESCRIBED_ZH)
def test_a_description_of_the_slip_reads_like_its_cause(
    engine: Engine, text: str, cause: str
) -> None:
    found = resemble(engine.kb, [text])
    assert found and found[0].cause == cause
    assert found[0].score >= levels.RESEMBLANCE_FLOOR
    assert found[0].standout > levels.RESEMBLANCE_STANDOUT
    assert found[0].words  # the shared words are shown


@pytest.mark.parametrize(
    "text",
    [
        "The office coffee machine is broken again and nobody knows who to call.",
        "hello world",  # one word a few accounts share ("world size") is no description
        "",
        "   ",
        # generic complaints that fit every cause point at none of them
        "多卡训练 loss 不收敛，单卡正常",
        "My DDP training looks healthy, the loss falls smoothly; just checking it is fine.",
        "分布式训练效果不好，求助",
    ],
)
def test_unrelated_text_reads_like_nothing(engine: Engine, text: str) -> None:
    assert resemble(engine.kb, [text]) == []


def test_a_question_aside_on_where_to_look_is_no_part_of_the_account(engine: Engine) -> None:
    # no-distributed-sampler forces epoch_steps_unchanged, whose question says where to look in
    # brackets ("iterations in the progress bar"); a post that merely mentions a progress bar
    # had read like that cause
    kb = engine.kb
    question = kb.facts["epoch_steps_unchanged"].question
    assert "progress bar" in question
    entries = account(kb, kb.causes["no-distributed-sampler"])
    assert not any("progress bar" in e for e in entries)
    assert any("steps" in e and "one GPU" in e for e in entries)  # the question itself stays
    text = "On 2 GPUs the loss I print is twice the value that the progress bar shows."
    assert all(r.cause != "no-distributed-sampler" for r in resemble(kb, [text]))


def test_auxiliaries_and_generic_verbs_are_no_terms() -> None:
    # used by one account only, such a word would weigh like a rare technical term
    assert terms("They did look, it seemed like something had been done in Python") == set()
    assert terms("the sampler did not shuffle") == {"sampler", "shuffle"}
    # a clause joiner says how a post is built: 'while the validation metrics look normal'
    # had read like expected-early-noise on 'while' as much as on 'normal'
    assert "while" not in terms("the loss is off while the validation metrics look normal")


def test_scores_are_cosines_and_repetition_adds_nothing(engine: Engine) -> None:
    text = DESCRIBED[0][0]
    once = index_for(engine.kb).resemble(text)
    twice = index_for(engine.kb).resemble(f"{text}\n{text}\n{text}")
    assert all(0.0 < r.score <= 1.0 for r in once)
    assert [(r.cause, round(r.score, 9)) for r in once] == [
        (r.cause, round(r.score, 9)) for r in twice
    ]


def test_a_resemblance_above_the_floor_raises_its_cause_and_is_explained(engine: Engine) -> None:
    cause = "sampler-seed-differs-per-rank"
    base = diagnose(engine, [])
    words = ("seed", "rank", "sampler")
    d = diagnose(engine, [], resemblance=[Resemblance(cause, 0.35, words, standout=8.0)])
    lifted = next(c for c in d.causes if c.id == cause)
    assert lifted.rank <= 3
    assert lifted.score > next(c.score for c in base.causes if c.id == cause)
    item = next(e for e in lifted.evidence if e.fact == DESCRIPTION)
    assert item.direction == "for" and 0 < item.size <= levels.RESEMBLANCE_MAX / math.log(10)
    assert "seed, rank, sampler" in (item.detail or "")
    assert [r.cause for r in d.resemblance] == [cause]


def test_words_alone_settle_nothing(engine: Engine) -> None:
    """However closely a post reads like a cause, the words move it at most x3: with nothing
    observed the cause is a hint (undecided), never settled, and the next step still runs."""
    cause = "torch-compile-ddp-interaction"
    d = diagnose(engine, [], resemblance=[Resemblance(cause, 0.9, ("compile",), standout=30.0)])
    assert d.verdict == "undecided" and not d.done
    assert d.causes[0].score < 0.30


def test_a_question_naming_a_suspect_is_no_resemblance(engine: Engine) -> None:
    """'Is it torch.compile or DDP?' names the reporter's suspect: question sentences are left
    out before the text is compared, statements stay."""
    asked = "Loss jumps in the first few hundred steps. Is it torch.compile or DDP?"
    assert statements(asked) == "Loss jumps in the first few hundred steps."
    assert (
        statements("是torch.compile的问题还是DDP的问题？前几百步loss跳高。") == "前几百步loss跳高。"
    )
    assert statements("用了 torch.compile 吗\nloss 震荡") == "loss 震荡"
    said = "I turned on torch.compile. The loss spikes."
    assert statements(said) == said
    found = {r.cause for r in resemble(engine.kb, [asked])}
    assert "torch-compile-ddp-interaction" not in found


@pytest.mark.parametrize(
    ("score", "standout"),
    [
        (levels.RESEMBLANCE_FLOOR - 0.01, 6.0),  # stands out, but shares too little
        (0.5, levels.RESEMBLANCE_STANDOUT),  # shares much, but so do the other causes
    ],
)
def test_a_resemblance_that_is_weak_or_common_moves_nothing(
    engine: Engine, score: float, standout: float
) -> None:
    cause = "sampler-seed-differs-per-rank"
    base = diagnose(engine, [])
    weak = Resemblance(cause, score, ("seed",), standout)
    d = diagnose(engine, [], resemblance=[weak])
    assert [(c.id, c.score) for c in d.causes] == [(c.id, c.score) for c in base.causes]


def test_a_description_backs_a_cause_the_setup_alone_cannot_lift(engine: Engine) -> None:
    """fp16 alone is no sign that fp16 overflows (the cause stays under the catch-all); a user
    who describes the overflow has given more than the setup."""
    fp16 = [Observation(fact="precision", value="fp16_amp", source="answer")]
    cause = "fp16-on-hardware-without-bf16"
    alone = diagnose(engine, fp16)
    assert alone.causes[0].catch_all
    told = diagnose(
        engine, fp16, resemblance=[Resemblance(cause, 0.3, ("fp16", "overflow"), standout=8.0)]
    )
    assert told.causes[0].id == cause


def test_ask_shows_what_the_description_reads_like(tmp_path: Path) -> None:
    text, cause = DESCRIBED[2]
    proc = run_cli("ask", text)
    assert proc.returncode == 0, proc.stderr
    assert "Your description reads like:" in proc.stdout and cause in proc.stdout
    post = tmp_path / "post.txt"
    post.write_text(text, encoding="utf-8")
    for args in (("ask", "--json", "--describe", str(post)), ("--json", "--describe", str(post))):
        doc = json.loads(run_cli(*args).stdout)
        assert doc["resemblance"][0]["cause"] == cause
        assert doc["causes"][0]["id"] == cause
        assert any(e["fact"] == DESCRIPTION for e in doc["causes"][0]["evidence"])


def test_a_user_rule_adds_reports_to_a_bundled_cause(tmp_path: Path) -> None:
    text = "the frobnicated widget wobbles sideways on thursdays"
    before = load_engine([])
    assert resemble(before.kb, [text]) == []
    (tmp_path / "mine.yaml").write_text(
        "causes:\n  - id: metric-reduction-wrong\n    override: append\n    reports:\n"
        "      - the frobnicated widget wobbles sideways\n"
        "tests:\n  - id: widget-wobble\n    text: my frobnicated widget wobbles sideways\n"
        "    expect_in_top: [metric-reduction-wrong]\n",
        encoding="utf-8",
    )
    after = load_engine([tmp_path])
    found = resemble(after.kb, [text])
    assert found and found[0].cause == "metric-reduction-wrong"
    proc = run_cli("kb", "test", "--kb", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
