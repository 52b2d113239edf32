"""Code pasted into a description: scanned as an excerpt, never read by the prose patterns, and
only what a piece of a script can show (nothing concluded from code that is not there)."""

from __future__ import annotations

import pytest

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.evidence.intake import code_blocks, extract, to_observations
from ddpadvisor.report.present import diagnose
from ddpadvisor.scan import scan_excerpt
from ddpadvisor.scan.rules import EXCERPT_CANNOT_SHOW, RULES
from ddpadvisor.service import load_engine


@pytest.fixture(scope="module")
def engine() -> Engine:
    return load_engine()


FENCED = """Loss goes nan after a few epochs on 4 GPUs; one GPU is fine. My loop:

```python
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
model = DDP(model, device_ids=[rank])
for epoch in range(100):
    for x, y in train_loader:
        with torch.autocast("cuda", dtype=torch.float16):
            out = model.module(x)
            loss = crit(out, y)
        scaler.scale(loss).backward()
        ...
```
Lowering the learning rate did not help.
"""

# Indented the way forums show code, in a Chinese post, ending inside its block.
INDENTED_ZH = """两张卡训练，loss 一直震荡，代码如下：
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=16, sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[local_rank], broadcast_buffers=False)
    for epoch in range(epochs):
        for batch in loader:
单卡没问题。
"""


def by_fact(engine: Engine, text: str) -> dict[str, tuple[object, str, str]]:
    return {f.fact: (f.value, f.origin, f.phrase) for f in extract(engine.kb, text)}


def test_a_fenced_loop_is_scanned_line_by_line(engine: Engine) -> None:
    found = by_fact(engine, FENCED)
    assert found["forward_bypasses_ddp"] == (True, "code", "out = model.module(x)")
    assert found["uses_distributed_sampler"][:2] == (False, "code")
    assert found["per_gpu_batch_size"][:2] == (32, "code")
    assert found["precision"][:2] == ("fp16_amp", "code")
    # the prose around it is still read
    assert found["loss_pattern"][:2] == ("nan", "text")
    assert found["world_size"][:2] == (4, "text")


def test_an_indented_chinese_excerpt_is_found_and_repaired(engine: Engine) -> None:
    assert len(code_blocks(INDENTED_ZH)) == 1
    found = by_fact(engine, INDENTED_ZH)
    assert found["uses_distributed_sampler"][:2] == (True, "code")
    assert found["broadcast_buffers_disabled"][:2] == (True, "code")
    assert found["world_size"][:2] == (2, "text")
    assert found["single_gpu_converges"][:2] == (True, "text")


def test_nothing_is_concluded_from_code_the_excerpt_does_not_show(engine: Engine) -> None:
    # A whole-script scan of this loop says "no torch.compile", "no no_sync", "fp32", "no
    # clipping", "no BatchNorm"; an excerpt cannot know any of that.
    found = by_fact(engine, FENCED)
    for fact in (
        "uses_torch_compile",
        "uses_no_sync",
        "uses_grad_clipping",
        "has_batchnorm",
        "module_created_after_wrap",
        "rank_conditional_state_change",
        "uses_syncbn",
    ):
        assert fact not in found, fact
    plain = "```\nmodel = DDP(model)\nfor x in loader:\n    model(x).sum().backward()\n```"
    assert by_fact(engine, plain).get("precision") is None


def test_prose_patterns_do_not_read_code(engine: Engine) -> None:
    # "without ... DistributedSampler" in a comment is code, not the user's statement
    text = "```\n# runs without a DistributedSampler for now\nloader = make_loader(ds)\n```"
    found = by_fact(engine, text)
    assert "uses_distributed_sampler" not in found


def test_one_line_of_code_in_prose_is_not_an_excerpt(engine: Engine) -> None:
    text = "I call model.module(x) in eval only.\nThe loss oscillates."
    assert code_blocks(text) == []


def test_text_that_only_looks_like_code_is_left_alone(engine: Engine) -> None:
    text = "Setup: lr = 3e-4 with warmup\nbatch = 64 per gpu, eight gpus (see below)\nthanks"
    for block in code_blocks(text):
        assert scan_excerpt(block.code).findings == []


def test_every_scanned_fact_says_what_an_excerpt_can_show() -> None:
    declared = set().union(*(rule.facts for rule in RULES))
    assert declared == set(EXCERPT_CANNOT_SHOW)


def test_code_beats_what_the_prose_says(engine: Engine) -> None:
    text = (
        "I use a DistributedSampler.\n\n```\n"
        "loader = DataLoader(ds, batch_size=8, shuffle=True)\nmodel = DDP(net)\n"
        "for x in loader:\n    model(x).sum().backward()\n```"
    )
    found = by_fact(engine, text)
    assert found["uses_distributed_sampler"][:2] == (False, "code")


def shown(code: str) -> dict[str, object]:
    return {f.fact: f.value for f in scan_excerpt(code).findings}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        # every micro-step inside no_sync: the optimizer steps on unsynced gradients
        (
            "for micro in range(accum):\n    with model.no_sync():\n"
            "        loss = model(x, y) / accum\n        loss.backward()\noptimizer.step()\n",
            {"uses_no_sync": True, "final_micro_step_synced": False, "loss_divided_by_accum": True},
        ),
        # `rank` is never defined in the excerpt: its name says what it is
        (
            "for x, y in loader:\n    loss = model(x, y)\n    loss.backward()\n"
            "    optimizer.step()\n    if rank == 0:\n        print(loss.item())\n",
            {"logs_rank0_only": True, "forward_bypasses_ddp": False},
        ),
        (
            "scaler = torch.cuda.amp.GradScaler()\nfor x, y in loader:\n"
            "    with torch.cuda.amp.autocast():\n        loss = model(x, y)\n"
            "    scaler.scale(loss).backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    scaler.step(optimizer)\n    scaler.update()\n",
            {"unscale_before_clip": False, "uses_grad_scaler": True, "precision": "fp16_amp"},
        ),
        (
            "optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr * dist.get_world_size())",
            {"lr_scaling": "linear", "optimizer_family": "adam"},
        ),
        (
            "model = DDP(model, device_ids=[rank])\nif rank == 0:\n"
            "    model.module.load_state_dict(torch.load('ckpt.pt'))\n",
            {"rank_conditional_state_change": True},
        ),
    ],
)
def test_what_an_excerpt_shows(code: str, expected: dict[str, object]) -> None:
    got = shown(code)
    assert {k: got.get(k) for k in expected} == expected


def test_the_assumed_wrap_is_never_itself_evidence() -> None:
    # the excerpt never wraps `model`; the wrap the scan assumes must not say "DDP keeps the
    # default broadcast_buffers" or locate anything on a line the user did not write
    findings = scan_excerpt("for x in loader:\n    model(x).sum().backward()\n").findings
    assert "broadcast_buffers_disabled" not in {f.fact for f in findings}
    assert all(1 <= int(f.where.rpartition(":")[2]) <= 2 for f in findings)


def test_a_correct_excerpt_raises_nothing_confidently(engine: Engine) -> None:
    code = (
        "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, batch_size=32, sampler=sampler)\n"
        "model = DDP(model.to(local_rank), device_ids=[local_rank])\n"
        "for epoch in range(epochs):\n    sampler.set_epoch(epoch)\n    for x, y in loader:\n"
        "        loss = criterion(model(x), y)\n        loss.backward()\n"
        "        optimizer.step()\n        optimizer.zero_grad()\n"
    )
    found = extract(engine.kb, f"Loss oscillates on 2 GPUs.\n```\n{code}```")
    diagnosis = diagnose(engine, to_observations(found, "description"))
    lead = next(c for c in diagnosis.causes if not c.catch_all)
    assert lead.score < 0.30, (lead.id, lead.score)


@pytest.mark.parametrize(
    "text",
    [
        # cut out of an if/else: the clause is kept, its body read
        "the code:\n        else:\n            loader = DataLoader(ds, batch_size=4, shuffle=True)\n"
        "            net = DDP(net)\n",
        # a call spread over lines, the next statement pasted one level too deep
        "```\nsampler = DistributedSampler(\n        ds,\n        shuffle=True)\n"
        "    loader = DataLoader(ds, batch_size=4,\n                        sampler=sampler)\n```",
        # every line posted as inline code
        "`loader = DataLoader(ds, batch_size=4, shuffle=True)`\n`net = DDP(net)`\n",
    ],
)
def test_excerpts_as_people_paste_them(engine: Engine, text: str) -> None:
    found = by_fact(engine, text)
    assert found["per_gpu_batch_size"][:2] == (4, "code")


def test_a_loader_not_seen_in_its_loop_says_nothing_about_sharding(engine: Engine) -> None:
    # accelerate or Lightning may shard it further down; with the loop shown, it is decided
    built = "```\nloader = DataLoader(ds, batch_size=4, shuffle=True)\nnet = DDP(net)\n```"
    assert "uses_distributed_sampler" not in by_fact(engine, built)
    looped = (
        built.replace("```\n", "", 1).rstrip("`")
        + "for x in loader:\n    net(x).sum().backward()\n"
    )
    assert by_fact(engine, f"```\n{looped}```")["uses_distributed_sampler"][:2] == (False, "code")


def test_excerpts_cut_from_whole_scripts_rarely_contradict_them() -> None:
    # bench/excerpt_agreement.py over the project's own scripts: an excerpt finding that a scan
    # of the whole script contradicts is what would mislead a user
    from bench.excerpt_agreement import DEFAULT, measure, scripts

    got = measure(scripts(DEFAULT))
    assert got.counts["excerpts"] > 500
    assert got.counts["contradicting"] <= 0.005 * got.findings, got.contradicting
