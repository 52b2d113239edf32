"""Intake: free text (English or Chinese) to facts with their phrases; ask and --describe."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.evidence.intake import extract
from ddpadvisor.kb.schema import Mention, pattern_problem
from ddpadvisor.service import load_engine
from tests.conftest import PYTHON, REPO


@pytest.fixture(scope="module")
def engine() -> Engine:
    return load_engine()


def test_chinese_post(engine: Engine) -> None:
    text = "8 张 A100，单卡训练正常，换成 DDP 后 loss 发散，学习率线性放大了，没有梯度裁剪。"
    found = {f.fact: (f.value, f.phrase) for f in extract(engine.kb, text)}
    assert found["world_size"] == (8, "8 张 A100")
    assert found["loss_pattern"][0] == "diverges" and found["loss_pattern"][1] == "发散"
    assert found["single_gpu_converges"][0] is True
    assert found["lr_scaling"][0] == "linear"
    assert found["uses_grad_clipping"][0] is False


@pytest.mark.parametrize(
    "text",
    [
        "I only print the loss on rank 0.",
        "The PyTorch losses were not reduced before printing.",
        "The loss needs to be averaged across ranks before logging.",
        "It ignores the training loss on the rest of the machines.",
        "只打印了 rank 0 的 loss",
        "打印前 loss 没有跨卡平均",
    ],
)
def test_rank0_loss_logging_phrasings(engine: Engine, text: str) -> None:
    # paraphrases of how public threads put it (llm.c#551, ArcticTraining#62, transformer-xl#14)
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found.get("logs_rank0_only") is True


@pytest.mark.parametrize(
    "text",
    [
        "The loss is all-reduced across ranks before logging.",
        "We log the loss averaged across ranks with all_reduce before printing.",
        "loss 先 all_reduce 之后再打印",
    ],
)
def test_a_reduced_loss_reads_as_not_rank0_only(engine: Engine, text: str) -> None:
    # the right practice said outright argues against the cause, rather than reading like it
    assert {f.fact: f.value for f in extract(engine.kb, text)}.get("logs_rank0_only") is False


@pytest.mark.parametrize(
    ("text", "loaded_on_some"),
    [
        ("Only rank 0 saves the checkpoint and all ranks load it with map_location.", False),
        ("每个进程都加载同一个 checkpoint", False),
        ("Only rank 0 loads the checkpoint after wrapping.", True),
    ],
)
def test_who_loads_the_checkpoint(engine: Engine, text: str, loaded_on_some: bool) -> None:
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found.get("rank_conditional_state_change") is loaded_on_some
    assert "logs_rank0_only" not in found  # saving on rank 0 is not logging on rank 0


@pytest.mark.parametrize(
    "text",
    [
        "With four GPUs an epoch has as many steps as on one GPU.",
        "The number of iterations per epoch did not go down with 8 GPUs.",
        "每个 epoch 的步数没有减少",
        "epoch 的迭代次数和单卡一样",
    ],
)
def test_an_unchanged_step_count_is_the_symptom_not_the_code_fact(
    engine: Engine, text: str
) -> None:
    # a per-GPU batch divided by N, or an iteration-based loop, keeps the count with a sampler
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found.get("epoch_steps_unchanged") is True
    assert "uses_distributed_sampler" not in found


@pytest.mark.parametrize(
    "text",
    [
        "Training on three GPUs is no faster than on one GPU.",
        "多卡训练和单卡一样慢",
        "单卡和多卡的训练时间差不多",
    ],
)
def test_no_speed_up_is_its_own_symptom(engine: Engine, text: str) -> None:
    # a slower step (interconnect, data loading) leaves the epoch as long with fewer steps
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found.get("no_speedup_with_more_gpus") is True
    assert not set(found) & {"uses_distributed_sampler", "epoch_steps_unchanged"}


@pytest.mark.parametrize("text", ["多卡和单卡一样的 loss 曲线", "The loss scale settled at 1024."])
def test_a_same_curve_or_a_settled_scale_is_no_symptom(engine: Engine, text: str) -> None:
    found = {f.fact for f in extract(engine.kb, text)}
    assert not found & {"no_speedup_with_more_gpus", "loss_scale_overflow_persists"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The loader is built without a DistributedSampler.", False),
        ("训练代码里没有用 DistributedSampler", False),
        ("sampler = DistributedSampler(dataset)", True),
    ],
)
def test_the_code_phrasings_still_set_the_sampler_fact(
    engine: Engine, text: str, value: bool
) -> None:
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found.get("uses_distributed_sampler") is value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The loss scale keeps halving and the overflows keep coming.", True),
        ("DeepSpeed logs OVERFLOW! and the loss scale is already at minimum.", True),
        ("训练中 loss scale 一直减半，一直溢出", True),
        ("A few overflow messages only at the start, then they stopped.", False),
        ("只在刚开始几步有溢出提示", False),
    ],
)
def test_overflows_that_persist_are_told_from_a_calibration_burst(
    engine: Engine, text: str, value: bool
) -> None:
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found.get("loss_scale_overflow_persists") is value
    assert found.get("loss_scale_overflow_logged") is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Training on one GPU with 8 images per GPU reaches AP 0.75, while training on four "
            "GPUs with 2 images per GPU only reaches 0.71.",
            {"per_gpu_batch_size": 2, "world_size": 4},
        ),
        (
            "On a single GPU with 32 samples per GPU it converges. On 8 GPUs it diverges.",
            {"world_size": 8},
        ),
        (
            "单卡每卡 32 个样本能收敛，而四张卡每卡 8 个样本就发散。",
            {"per_gpu_batch_size": 8, "world_size": 4},
        ),
        (
            "8 GPUs, 16 samples per GPU, 4 gradient accumulation steps.",
            {"per_gpu_batch_size": 16, "world_size": 8, "grad_accum_steps": 4},
        ),
    ],
)
def test_counts_of_the_single_gpu_run_are_not_the_ddp_runs(
    engine: Engine, text: str, expected: dict[str, int]
) -> None:
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    counts = {k: v for k, v in found.items() if k in expected or isinstance(v, int)}
    assert {k: counts.get(k) for k in expected} == expected
    assert not {k for k, v in counts.items() if k not in expected and not isinstance(v, bool)}


@pytest.mark.parametrize(
    ("text", "metric_only"),
    [
        ("It reaches AP 0.75 on one GPU.", False),
        ("mAP stays at 0 throughout.", True),
        ("精度为0.5", False),
        ("精度为0", True),
    ],
)
def test_a_metric_of_zero_is_not_read_from_a_decimal(
    engine: Engine, text: str, metric_only: bool
) -> None:
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert (found.get("loss_pattern") == "metric_only") is metric_only


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # how reporters compare the multi-GPU run with the single-GPU one
        (
            "It learned much more slowly on two GPUs than on one.",
            {"loss_pattern": "worse_than_reference"},
        ),
        (
            "One GPU with 8 images per GPU reaches AP 0.75, while four GPUs only reach 0.71.",
            {"loss_pattern": "worse_than_reference", "single_gpu_converges": True},
        ),
        (
            "Its accuracy curve was much better than the eight-GPU one.",
            {"loss_pattern": "worse_than_reference"},
        ),
        ("On a single A100 the loss behaves normally.", {"single_gpu_converges": True}),
        (
            "The AP logged during training does not match what test.py gives for the checkpoint.",
            {"loss_pattern": "metric_only"},
        ),
        ("训练时评估的 mAP 和单独测试的结果对不上", {"loss_pattern": "metric_only"}),
        # not a comparison of outcomes: a slower run, a weak single-GPU run, curves that differ
        ("Training is slower on 8 GPUs.", {}),
        ("On one GPU it only reaches 0.3 AP.", {}),
        ("The loss curves do not match between runs.", {}),
    ],
)
def test_comparisons_with_the_single_gpu_run(
    engine: Engine, text: str, expected: dict[str, object]
) -> None:
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    wanted = {"loss_pattern", "single_gpu_converges"}
    assert {k: v for k, v in found.items() if k in wanted} == expected


def test_nothing_found_in_unrelated_text(engine: Engine) -> None:
    assert extract(engine.kb, "The weather is nice today. 今天天气不错。") == []


def test_unsafe_patterns_are_rejected() -> None:
    assert pattern_problem("(a+)+b")
    assert pattern_problem("(\\w+\\s?)*x")
    assert pattern_problem("(x)\\1")
    assert pattern_problem("a{2,}b") is None
    with pytest.raises(ValueError, match="nested quantifier"):
        Mention(value=True, en=["(a*)*"])


def test_a_user_rule_extends_mentions(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "facts:\n  - id: uses_lora\n    override: append\n    mentions:\n"
        "      - value: true\n        zh: ['低秩适配']\n",
        encoding="utf-8",
    )
    engine = load_engine([tmp_path])
    found = {f.fact: f.value for f in extract(engine.kb, "用了低秩适配微调")}
    assert found == {"uses_lora": True}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DDPADVISOR_NO_USER_KB": "1"}
    return subprocess.run(
        [PYTHON, "-m", "ddpadvisor", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_ask_command_shows_phrases_and_json(tmp_path: Path) -> None:
    proc = _run("ask", "4x V100, loss goes to nan, torch.compile on")
    assert proc.returncode == 0, proc.stderr
    assert "gpu_model = V100" in proc.stdout and "\u201closs goes to nan\u201d" in proc.stdout
    post = tmp_path / "post.txt"
    post.write_text("每卡 batch 2，梯度累积 8，loss 震荡", encoding="utf-8")
    proc = _run("--json", "--describe", str(post))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    facts = {f["fact"]: f["value"] for f in doc["facts"]}
    assert facts == {"per_gpu_batch_size": 2, "grad_accum_steps": 8, "loss_pattern": "oscillates"}
    proc = _run("ask", "--json", "--describe", str(post))
    assert {i["fact"] for i in json.loads(proc.stdout)["intake"]} == set(facts)
    missing = _run("ask", "--describe", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and "nope.txt" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_ask_without_text_is_one_line_exit_2() -> None:
    proc = _run("ask")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "ask needs a description" in proc.stderr


def test_flat_answers_file_unknown_is_declined_in_json(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("loss_pattern: 发散\nprecision: unknown\n", encoding="utf-8")
    proc = _run("--json", "--answers", str(path), "--set", "trace=unknown")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["declined"] == ["precision", "trace"]
    assert not {"precision", "trace"} & {s["id"].removeprefix("ask:") for s in doc["next_steps"]}
    assert doc["facts"][0]["value"] == "diverges"


PROSE = (
    "Each rank averages the loss over its own target tokens, so DDP weights the ranks equally "
    "instead of by token count, and the training loss curves differ with the number of nodes."
)
EXCERPT = "\n".join(
    [
        "```python",
        "import torch",
        "from torch.utils.data import DataLoader",
        *[f"layer_{i} = torch.nn.Linear(hidden_size, hidden_size)" for i in range(25)],
        "for batch in DataLoader(dataset, batch_size=per_device_batch):",
        "    outputs = model(**batch)",
        "    optimizer.step()",
        "```",
    ]
)


def test_a_long_excerpt_does_not_drown_the_prose(engine: Engine) -> None:
    from ddpadvisor.evidence.intake import _blank, code_blocks, described
    from ddpadvisor.kb.resemblance import log_lr, resemble

    text = f"{PROSE}\n\n{EXCERPT}\n"
    prose = _blank(text, code_blocks(text))
    assert "hidden_size" not in prose and "target tokens" in prose
    pasted = {r.cause: r for r in resemble(engine.kb, [text])}
    alone = {r.cause: r for r in resemble(engine.kb, [prose])}
    read = {r.cause: r for r in described(engine.kb, [text])}
    cause = "per-rank-token-mean-loss"
    assert alone[cause].score > pasted[cause].score  # the excerpt dilutes the whole paste
    assert read[cause] == alone[cause]
    # each cause at its stronger reading: never the two added up
    for c, r in read.items():
        assert log_lr(r) == max(log_lr(x[c]) if c in x else 0.0 for x in (alone, pasted))


def test_without_code_one_reading(engine: Engine) -> None:
    from ddpadvisor.evidence.intake import described
    from ddpadvisor.kb.resemblance import resemble

    assert described(engine.kb, [PROSE]) == resemble(engine.kb, [PROSE])


@pytest.mark.parametrize(
    ("text", "scaling"),
    [
        ("Throughput is 70% of linear scaling on two nodes.", None),
        ("I call torch.sqrt(x) inside the loss.", None),
        ("The learning rate was linearly scaled with the batch.", "linear"),
        ("I followed the linear scaling rule.", "linear"),
        ("lr scaled by the square root of the batch ratio", "sqrt"),
        ("学习率线性放大了", "linear"),
    ],
)
def test_linear_scaling_is_the_learning_rates_only_when_it_says_so(
    engine: Engine, text: str, scaling: str | None
) -> None:
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found.get("lr_scaling") == scaling


def test_slower_is_not_lower(engine: Engine) -> None:
    # a speed complaint ("two times slower than the single-GPU run") is no worse result
    text = "The 8-GPU DDP run is two times slower than the single-GPU run."
    assert "loss_pattern" not in {f.fact for f in extract(engine.kb, text)}
    text = "Accuracy is lower than the single-GPU run."
    found = {f.fact: f.value for f in extract(engine.kb, text)}
    assert found["loss_pattern"] == "worse_than_reference"
