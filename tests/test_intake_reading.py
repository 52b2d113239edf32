"""Intake reading quality (issue 26): the misreads and misses measured on real posts, each
pinned with its near misses, in English and Chinese, and the two seed threads' opening posts."""

from __future__ import annotations

import pytest

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.evidence.intake import extract
from ddpadvisor.service import load_engine


@pytest.fixture(scope="module")
def engine() -> Engine:
    return load_engine()


def read(engine: Engine, text: str) -> dict[str, object]:
    return {f.fact: f.value for f in extract(engine.kb, text)}


# ----------------------------------------------------------------- numbers never from a model
@pytest.mark.parametrize(
    ("text", "world_size", "gpu_model"),
    [
        ("We train on 8 Tesla M40 GPUs.", 8, "Tesla M40"),
        ("Our V100 GPUs run out of memory.", None, "V100"),
        ("Four A100 GPUs with DDP.", 4, "A100"),
        ("We use 2 A100 cards.", 2, "A100"),
        ("Two RTX 3090 cards in one box.", 2, "RTX 3090"),
        ("3090 GPUs are cheap.", None, "3090"),
        ("4090 cards only.", None, "4090"),
        ("The P40 cards are old.", None, "P40"),
        ("Three K80 GPUs.", 3, "K80"),
        ("Two T4 GPUs on Kaggle.", 2, "T4"),
        ("We use MI250 GPUs.", None, "MI250"),
        ("on 4 V100, PyTorch 2.0", 4, "V100"),
        ("用8张A100训练", 8, "A100"),
        ("4 张 V100", 4, "V100"),
        ("在 8 卡 H800 上训练", 8, "H800"),
        ("显卡是 3090", None, "3090"),
    ],
)
def test_counts_never_come_from_model_names(
    engine: Engine, text: str, world_size: int | None, gpu_model: str
) -> None:
    found = read(engine, text)
    assert found.get("world_size") == world_size
    assert str(found.get("gpu_model", "")).replace("RTX ", "") == gpu_model.replace("RTX ", "")


@pytest.mark.parametrize(
    "text",
    [
        "I want to know why torchtitan behaves differently.",
        "GPT4 suggested I lower the learning rate.",
        "The L4 cache size is irrelevant here.",
        "It spikes at step 3090.",
        "Titanic dataset, loss spikes.",
    ],
)
def test_a_model_is_a_whole_word(engine: Engine, text: str) -> None:
    assert "gpu_model" not in read(engine, text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Titan RTX, one card.", "Titan RTX"),
        ("8x A100.", "A100"),
        ("on a Tesla M40.", "Tesla M40"),
    ],
)
def test_model_names_still_read(engine: Engine, text: str, expected: str) -> None:
    assert str(read(engine, text)["gpu_model"]).lower() == expected.lower()


@pytest.mark.parametrize(
    ("text", "world_size"),
    [
        ("每一张卡的显存都是32G", None),
        ("每张卡一个进程，每张卡 batch 4", None),
        ("一张卡上跑正常，8张卡就震荡", 8),
        ("每个节点 8 张卡，一共 2 个节点", 16),
        ("两台机器，每台8张卡", 16),
        ("With 1 GPU everything works, with 4 GPUs it does not.", 4),
        ("Each GPU holds one replica.", None),
        ("Some samples are seen by two ranks.", None),
        # several counts: the first, not the one with more digits
        ("It reaches 77.9% on 8 GPUs, 79.1% on 16 GPUs and 78.8% on 32 GPUs.", 8),
        ("On 2 processes the lr decays and climbs back; on 16 processes it does so twice.", 2),
    ],
)
def test_per_card_and_single_gpu_phrases_are_no_count(
    engine: Engine, text: str, world_size: int | None
) -> None:
    assert read(engine, text).get("world_size") == world_size


# ---------------------------------------------------------------------------------- negation
@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("No NaNs or spikes, the loss just stops going down after 2k steps.", "plateau"),
        ("There are no spikes at all.", None),
        ("The loss didn't diverge, it oscillates around 2.3.", "oscillates"),
        ("The loss never explodes.", None),
        ("It doesn't blow up, it is just noisy.", "oscillates"),
        ("没有nan，loss一直在2.3附近震荡", "oscillates"),
        ("loss 没有发散，也没有 nan", None),
        ("没有出现 nan，但是 loss 降不下去", "plateau"),
        ("The NaN check never fires.", None),
        ("不是发散，是震荡", "oscillates"),
        ("一点都不震荡", None),
        ("The loss is not only noisy but diverges.", "diverges"),
        # near misses: a negation that governs something else
        ("Without gradient clipping the loss spikes.", "spikes"),
        ("I have no idea why the loss spikes.", "spikes"),
        ("I am not sure why the loss is not decreasing.", "plateau"),
        ("No NaN so far, but the loss spikes to 20.", "spikes"),
        ("loss 没有 nan，偶尔飙到几十", "spikes"),
    ],
)
def test_a_denied_shape_is_not_read(engine: Engine, text: str, pattern: str | None) -> None:
    assert read(engine, text).get("loss_pattern") == pattern


@pytest.mark.parametrize(
    ("text", "fact", "value"),
    [
        ("I don't use torch.compile.", "uses_torch_compile", False),
        ("We are not using LoRA.", "uses_lora", False),
        ("没有用 torch.compile", "uses_torch_compile", False),
        ("torch.compile is on.", "uses_torch_compile", True),
        ("I forgot the DistributedSampler.", "uses_distributed_sampler", False),
        ("The loss spikes, and there is no gradient clipping.", "uses_grad_clipping", False),
        # a cue that negates a verb, not the thing: the loss scale exists
        ("It stops with: cannot decrease the loss scale anymore.", "uses_grad_scaler", True),
    ],
)
def test_a_denied_thing_is_read_as_absent(
    engine: Engine, text: str, fact: str, value: bool
) -> None:
    assert read(engine, text).get(fact) is value


# ------------------------------------------------------- ranks that differ, the loss scale
@pytest.mark.parametrize(
    ("text", "fact", "value"),
    [
        ("The loss differs between ranks.", "rank_losses_identical", False),
        ("各个 rank 的 loss 不一样", "rank_losses_identical", False),
        ("Every GPU prints exactly the same loss.", "rank_losses_identical", True),
        ("每张卡打印的 loss 完全一样", "rank_losses_identical", True),
        ("The weights drift apart across GPUs.", "param_checksums_match", False),
        ("The model replicas diverge from each other.", "param_checksums_match", False),
        ("The parameters on rank 0 and rank 1 diverge.", "param_checksums_match", False),
        ("不同卡上的权重不一样了", "param_checksums_match", False),
        ("The gradients are no longer the same on every rank.", "grads_match_after_sync", False),
        ("各卡的梯度不一致", "grads_match_after_sync", False),
        ("The ranks get overlapping samples.", "sampler_shards_overlap", True),
        ("不同 rank 读到的数据有重叠", "sampler_shards_overlap", True),
    ],
)
def test_ranks_that_differ_are_read_as_such_not_as_a_diverging_loss(
    engine: Engine, text: str, fact: str, value: bool
) -> None:
    found = read(engine, text)
    assert found.get(fact) is value
    assert "loss_pattern" not in found


@pytest.mark.parametrize(
    "text", ["The loss diverges after 300 steps.", "loss 在 300 步后发散了", "The run diverged."]
)
def test_a_diverging_loss_is_still_read(engine: Engine, text: str) -> None:
    found = read(engine, text)
    assert found.get("loss_pattern") == "diverges"
    assert "param_checksums_match" not in found and "rank_losses_identical" not in found


@pytest.mark.parametrize(
    "text",
    [
        "Current loss scale already at minimum - cannot decrease scale anymore.",
        "It stops with: cannot decrease the loss scale anymore.",
        "The loss scale keeps halving until the run dies.",
    ],
)
def test_a_loss_scale_at_its_floor_is_no_plateau(engine: Engine, text: str) -> None:
    found = read(engine, text)
    assert found.get("loss_scale_overflow_persists") is True
    assert found.get("loss_scale_overflow_logged") is True
    assert "loss_pattern" not in found


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("The loss scale does not go down any more.", None),
        ("The learning rate does not decrease after warmup.", None),
        ("The grad norm spikes.", None),
        ("The loss does not decrease anymore.", "plateau"),
    ],
)
def test_a_shape_said_of_another_quantity_is_not_the_losss(
    engine: Engine, text: str, pattern: str | None
) -> None:
    assert read(engine, text).get("loss_pattern") == pattern


# ------------------------------------------------------------- which shape, when several are said
@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("loss一直震荡，前几百步基本降不下去", "oscillates"),
        ("The loss oscillates and does not go down.", "oscillates"),
        ("The training loss plateaus around 0.7 and the curve is noisy.", "oscillates"),
        ("The loss oscillates and sometimes spikes to tens.", "oscillates"),
        ("loss 震荡，偶尔飙到几十", "oscillates"),
        ("The loss oscillates and often jumps high.", "spikes"),
        ("The loss jumps around and then explodes to nan.", "nan"),
        ("loss 震荡得很厉害，然后发散了", "diverges"),
        ("The loss spiked right after resuming from the checkpoint.", "resume_jump"),
    ],
)
def test_the_more_specific_shape_wins(engine: Engine, text: str, pattern: str) -> None:
    assert read(engine, text).get("loss_pattern") == pattern


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("The loss flattens out at 3.2 after epoch 2.", "plateau"),
        ("It settles at 4.5 and never improves.", "plateau"),
        ("The loss barely moves from its initial value.", "plateau"),
        ("The loss is stuck at 6.9.", "plateau"),
        ("After 1k steps the loss stagnates.", "plateau"),
        ("loss 卡在 2.5 不下降", "plateau"),
        ("loss 基本不动", "plateau"),
        ("loss 降到 3 左右就不动了", "plateau"),
        ("loss 没有下降", "plateau"),
        # near misses
        ("The loss goes down nicely.", None),
        ("Throughput stays flat when I add GPUs.", None),
        ("Then it settles and the loss goes down.", None),
    ],
)
def test_plateau_wording(engine: Engine, text: str, pattern: str | None) -> None:
    assert read(engine, text).get("loss_pattern") == pattern


# ---------------------------------------------------------------------- the reference run's
@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("Compared with a run without accumulation, the loss is 4x higher.", None),
        ("和不做梯度累积的实验相比，loss 高了 4 倍", None),
        ("Same as the reference run without accumulation, except we use DDP.", None),
        ("The baseline without gradient accumulation is fine; mine uses 8 accumulation steps.", 8),
        (
            "I accumulate gradients over 4 steps. Compared with a run without accumulation, the "
            "loss is much noisier.",
            4,
        ),
        ("No gradient accumulation.", 1),
        ("Batch 1 with 32 accumulation steps diverges next to batch 32 without accumulation.", 32),
        ("不用梯度累积", 1),
    ],
)
def test_a_setting_of_the_compared_run_is_not_the_users(
    engine: Engine, text: str, steps: int | None
) -> None:
    assert read(engine, text).get("grad_accum_steps") == steps


# ------------------------------------------------------------- learning rate and batch ratio
@pytest.mark.parametrize(
    ("text", "scaling"),
    [
        ("lr 0.0002 -> 0.0004 on 4 GPUs", "sqrt"),
        ("lr 1e-4 on one GPU, 4e-4 on 4 GPUs", "linear"),
        ("I raised the learning rate from 0.001 to 0.008 for 8 GPUs.", "linear"),
        ("学习率从 1e-4 调到 8e-4，用了 8 张卡", "linear"),
        ("The total batch went from 4 to 32; lr 1e-4 -> 8e-4.", "linear"),
        ("lr 1e-4 -> 3e-4 on 8 GPUs", None),  # raised by a factor no choice names
        ("lr 1e-4 -> 4e-4", None),  # nothing to read the factor against
        ("lr 3e-6, batch 2 per card", None),
    ],
)
def test_an_lr_raised_by_a_factor_is_read_against_the_batch(
    engine: Engine, text: str, scaling: str | None
) -> None:
    assert read(engine, text).get("lr_scaling") == scaling


@pytest.mark.parametrize(
    ("text", "ratio"),
    [
        ("总batch从4变成32", 8.0),
        ("The total batch went from 4 (single GPU) to 32.", 8.0),
        ("全局 batch 从 32 涨到 256", 8.0),
        ("The global batch size went from 64 to 256.", 4.0),
        ("The effective batch size stays the same as on one GPU.", None),
        ("The batch per GPU went from 4 to 32.", None),
    ],
)
def test_the_global_batch_ratio_from_two_numbers(
    engine: Engine, text: str, ratio: float | None
) -> None:
    assert read(engine, text).get("global_batch_ratio") == ratio


@pytest.mark.parametrize(
    ("text", "off"),
    [
        ("The logged loss is four times smaller than on one GPU.", True),
        ("The reported value is four times smaller than it should be.", True),
        ("打印出来的 loss 小了 4 倍", True),
        ("My batch is four times smaller than in the paper.", None),
        ("Training is four times faster on 4 GPUs.", None),
    ],
)
def test_a_loss_off_by_a_factor(engine: Engine, text: str, off: bool | None) -> None:
    assert read(engine, text).get("logged_loss_off_by_factor") is off


@pytest.mark.parametrize(
    ("text", "converges"),
    [
        ("单卡跑的时候loss下降很正常", True),
        ("单卡训练的时候 loss 收敛得很好", True),
        ("On a single GPU the loss goes down fine.", True),
        ("在一张3090上跑是正常的", True),
        ("单卡也发散", False),
        ("单卡的时候效果不好", None),
        ("单卡跑的时候也不收敛", None),
        ("I have never tried a single GPU run.", None),
    ],
)
def test_the_single_gpu_run_converging(engine: Engine, text: str, converges: bool | None) -> None:
    assert read(engine, text).get("single_gpu_converges") is converges


# ----------------------------------------------------------------- the seed threads' posts
SEED_000 = {
    "en": (
        "PyTorch multi-GPU DDP training of a large model: the loss oscillates and does not "
        "converge, what is going on?\n\n"
        "7B LoRA fine-tune on 8xA100, total batch went from 4 (single GPU) to 32, lr scaled "
        "linearly x8, DistributedSampler shuffle=True, grad clipping on; the loss oscillates and "
        "sometimes spikes to tens"
    ),
    "zh": (
        "PyTorch多卡DDP训练大模型，loss震荡不收敛是什么情况？\n\n"
        "8 张 A100 上做 7B LoRA 微调，总 batch 从 4（单卡）变成 32，学习率线性放大 8 倍，"
        "DistributedSampler shuffle=True，开了梯度裁剪；loss 震荡，偶尔飙到几十"
    ),
}
FACTS_000 = {
    "uses_lora": True,
    "world_size": 8,
    "gpu_model": "A100",
    "global_batch_ratio": 8.0,
    "single_gpu_same_global_batch": False,
    "lr_scaling": "linear",
    "uses_distributed_sampler": True,
    "uses_grad_clipping": True,
    "loss_pattern": "oscillates",
}
# Thread 001: the title (paragraph 0 of the seed) and the reporter's question in their own
# words as issue 26 quotes them (the seed's paragraph 1 is already a reply).
QUESTION_001 = {
    "en": " Is it torch.compile or DDP?",
    "zh": "是 torch.compile 的问题还是 DDP 的问题？",
}
SEED_001 = {
    "en": (
        "PyTorch 2.0 running a large model, the DDP training loss oscillates badly, please help\n\n"
        "PyTorch 2.0, 13B LLaMA on 4 V100, I turned on torch.compile, batch 2 per card, "
        "accumulation 8, lr 3e-6. The loss often jumps high in the first few hundred steps."
    ),
    "zh": (
        "PyTorch 2.0跑大模型，DDP训练loss震荡严重，求大佬指点\n\n"
        "PyTorch 2.0 跑 13B LLaMA，4 张 V100，开了 torch.compile，每张卡 batch 2，梯度累积 8，"
        "lr 3e-6，前几百步 loss 经常跳得很高。"
    ),
}
FACTS_001 = {
    "torch_version": "2.0",
    "world_size": 4,
    "gpu_model": "V100",
    "uses_torch_compile": True,
    "per_gpu_batch_size": 2,
    "grad_accum_steps": 8,
    "loss_pattern": "spikes",
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_seed_000_opening_post(engine: Engine, lang: str) -> None:
    assert read(engine, SEED_000[lang]) == FACTS_000


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("asks", [False, True])
def test_seed_001_opening_post(engine: Engine, lang: str, asks: bool) -> None:
    text = SEED_001[lang] + (QUESTION_001[lang] if asks else "")
    assert read(engine, text) == FACTS_001


def test_the_seed_titles_alone(engine: Engine) -> None:
    assert read(engine, "PyTorch多卡DDP训练大模型，loss震荡不收敛是什么情况？") == {
        "loss_pattern": "oscillates"
    }
    assert read(engine, "PyTorch 2.0跑大模型，DDP训练loss震荡严重，求大佬指点") == {
        "torch_version": "2.0",
        "loss_pattern": "oscillates",
    }
