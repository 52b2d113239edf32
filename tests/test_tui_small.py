"""The TUI at 80x24 (an SSH terminal), in English and Chinese: the describe list scrolls and
every line can be unticked; a long question never hides its choices; a number field lets go
(Esc, d) and refuses a value out of range; any answer, "don't know" included, can be changed;
a second description adds to the first; every string the TUI shows has its Chinese.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_interview_tui import INTAKE_KB
from test_tui_support import FIXTURE_KB, probe_runner, read_description
from textual.widgets import Input, OptionList, SelectionList

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.i18n import ZH
from ddpadvisor.kb.load import load_kb
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.tui.app import DDPAdvisorApp, create_app
from ddpadvisor.tui.screens import describe
from ddpadvisor.tui.screens.describe import DescribeScreen
from ddpadvisor.tui.screens.diagnose import DiagnoseScreen
from ddpadvisor.tui.session import Session, check_range
from ddpadvisor.tui.widgets.history import HistoryList
from ddpadvisor.tui.widgets.paragraph import Paragraph
from ddpadvisor.tui.widgets.question import AnswerInput, QuestionPanel

SMALL_KB = Path(__file__).resolve().parent / "snapshots" / "kb-tui-small"
SMALL = (80, 24)
POST = {
    "en": (
        "Single GPU run was fine. On 4 GPUs with DDP the loss oscillates, batch 16 per GPU and "
        "500 warmup steps. fp16 with no "
        "GradScaler, accumulation 8 and I never divide the loss. DistributedSampler with "
        "set_epoch every epoch, yet the ranks read the same samples and every epoch the shuffle "
        "order is the same, as if the same permutation is reused. After a day the weights "
        "differ between ranks."
    ),
    "zh": (
        "单卡训练正常。4 张卡 DDP 以后 loss 震荡，每张卡 batch 16，warmup 500 步。"
        "半精度，没有用 GradScaler，梯度累积 8，"
        "loss 没有除以累积步数。用了 DistributedSampler，每个 epoch 都调 set_epoch，可是各卡"
        "读到的样本重复，每个 epoch 的打乱顺序都一样，好像一直沿用同一个排列。"
        "跑了一天各卡权重不一样。"
    ),
}
FACTS_IN_POST = 13
TUI = Path(__file__).resolve().parent.parent / "ddpadvisor" / "tui"


def small_engine() -> Engine:
    kb = load_kb([FIXTURE_KB, INTAKE_KB, SMALL_KB])
    kb.raise_first_problem()
    return Engine(kb)


def make_app(lang: str = "en", **kwargs: Any) -> DDPAdvisorApp:
    return create_app(
        session=Session(small_engine(), lang=lang),  # type: ignore[arg-type]
        probe_runner=probe_runner(),
        trace_runner=probe_runner(),
        show_start=kwargs.pop("show_start", False),
        **kwargs,
    )


def run(app: DDPAdvisorApp, body: Any) -> None:
    async def go() -> None:
        async with app.run_test(size=SMALL) as pilot:
            await pilot.pause()
            await body(pilot)

    asyncio.run(go())


async def to_the_number_question(pilot: Any) -> QuestionPanel:
    """The fixture asks two yes/no questions first; "don't know" to both brings up the
    accumulation steps, a number."""
    await pilot.press("d", "d")
    panel = pilot.app.screen.query_one(QuestionPanel)
    assert panel.prompt is not None and panel.prompt.fact == "grad_accum_steps"
    assert isinstance(pilot.app.focused, AnswerInput)
    return panel


# -- number fields that let go ------------------------------------------------------------------
def test_esc_leaves_a_number_field_and_letters_reach_the_screen() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        panel = await to_the_number_question(pilot)
        entry = panel.query_one("#q-input", Input)
        await pilot.press("v")  # a screen key, not typed: the compact view changes
        assert entry.value == "" and app.screen.view == "why"
        await pilot.press("escape")
        assert isinstance(app.focused, OptionList)  # the choices below the field
        await pilot.press("4")  # a digit from the choices goes back into the field
        assert app.focused is entry and entry.value == "4"

    run(app, body)


def test_d_in_a_number_field_is_dont_know_and_0_is_a_number() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        panel = await to_the_number_question(pilot)
        dont_know = panel.query_one("#q-choices", OptionList).get_option_at_index(0)
        assert str(dont_know.prompt).startswith("d ")  # shown on its key, not on 0
        await pilot.press("0")
        assert panel.query_one("#q-input", Input).value == "0"  # 0 is typed, as a number
        await pilot.press("d")
        assert "grad_accum_steps" in app.session.declined
        assert "grad_accum_steps" not in app.session.answers

    run(app, body)


def test_a_value_out_of_range_is_refused_in_one_line() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        panel = await to_the_number_question(pilot)
        entry = panel.query_one("#q-input", Input)
        for typed in ("0", "-3"):
            entry.value = ""
            await pilot.press(*typed, "enter")
            error = panel.query_one("#q-error")
            assert error.display and "grad_accum_steps must be >= 1" in str(error.render())
            assert "grad_accum_steps" not in app.session.answers
            assert panel.prompt is not None and panel.prompt.fact == "grad_accum_steps"
        entry.value = ""
        await pilot.press("4", "enter")
        assert app.session.answers["grad_accum_steps"].value == 4

    run(app, body)


@pytest.mark.parametrize(
    ("fact", "good", "bad"),
    [
        ("grad_accum_steps", [1, 8], [0, -3]),
        ("per_gpu_batch_size", [1], [0]),
        ("world_size", [1, 64], [0, -1]),
        ("warmup_steps", [0, 500], [-1]),
        ("adam_beta2", [0.0, 0.999], [1.0, 1.5, -0.1]),
        ("global_batch_ratio", [0.25, 8.0], [0.0, -2.0]),
        ("nonfinite_grad_steps", [0], [-1]),
    ],
)
def test_number_ranges(engine: Engine, fact: str, good: list[float], bad: list[float]) -> None:
    # the ranges are the KB's own (min / max / exclusive_*), typed or given as text
    kb_fact = engine.kb.facts[fact]
    for value in good:
        check_range(kb_fact, value)
        check_range(kb_fact, str(value))
    for value in bad:
        with pytest.raises(ValueProblem, match=fact):
            check_range(kb_fact, value)
        with pytest.raises(ValueProblem, match=fact):
            check_range(kb_fact, str(value))


# -- a long question keeps its choices on screen ------------------------------------------------
def test_a_long_question_never_hides_its_choices() -> None:
    """(In Chinese too: test_long_question_snapshot[zh].)"""
    app = make_app()

    async def body(pilot: Any) -> None:
        panel = app.screen.query_one(QuestionPanel)
        assert panel.prompt is not None and panel.prompt.fact == "loss_divided_by_accum"
        words = panel.query_one("#q-words")
        assert words.max_scroll_y > 0  # the words scroll in their box ...
        choices = panel.query_one("#q-choices", OptionList)
        bottom = choices.region.y + choices.region.height
        assert choices.region.height == choices.option_count == 3  # ... every choice shows
        assert bottom <= app.size.height - 1  # above the footer

    run(app, body)


# -- revisiting any answer ----------------------------------------------------------------------
def test_a_dont_know_can_be_revisited_and_changed() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        await pilot.press("d")  # "don't know" to loss_divided_by_accum
        session = app.session
        assert "loss_divided_by_accum" in session.declined
        history = app.screen.query_one(HistoryList)
        assert [o.id for o in history.options] == ["loss_divided_by_accum"]
        await pilot.press("b")  # back to the last answer given: the "don't know"
        panel = app.screen.query_one(QuestionPanel)
        assert panel.prompt is not None and panel.prompt.editing
        assert panel.prompt.fact == "loss_divided_by_accum" and panel.prompt.declined
        choices = panel.query_one("#q-choices", OptionList)
        assert "(current)" in str(choices.get_option_at_index(choices.option_count - 1).prompt)
        await pilot.press("1")
        assert session.answers["loss_divided_by_accum"].value is True
        assert "loss_divided_by_accum" not in session.declined

    run(app, body)


def test_any_history_line_can_be_chosen_to_change_it() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        await pilot.press("d", "2")  # don't know, then "no" to calls_set_epoch
        screen = app.screen
        assert isinstance(screen, DiagnoseScreen)
        await pilot.press("v", "v", "v")  # the compact view cycles to the history
        history = screen.query_one(HistoryList)
        assert [o.id for o in history.options] == ["loss_divided_by_accum", "calls_set_epoch"]
        history.focus()
        history.highlighted = 0
        await pilot.press("enter")
        prompt = screen.query_one(QuestionPanel).prompt
        assert prompt is not None and prompt.editing and prompt.fact == "loss_divided_by_accum"

    run(app, body)


# -- describing ---------------------------------------------------------------------------------
def test_every_line_of_a_long_describe_list_can_be_reached_and_unticked() -> None:
    """(In Chinese too: test_describe_list_snapshot[zh].)"""
    app = make_app()

    async def body(pilot: Any) -> None:
        app.open_describe(POST["en"])
        await pilot.pause()
        await read_description(pilot)
        screen = app.screen
        assert isinstance(screen, DescribeScreen)
        found = screen.query_one("#describe-found", SelectionList)
        assert len(screen.findings) == FACTS_IN_POST
        assert app.focused is found and found.max_scroll_y > 0  # more lines than room
        # The last line (what the text reads like) and the last fact: reached by keyboard,
        # scrolled to, unticked.
        await pilot.press("end", "space", "up", "space")
        assert found.scroll_offset.y > 0
        last = screen.findings[-1].fact
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, DiagnoseScreen)
        assert last not in app.session.answers and not app.session.resemblance
        assert len(app.session.answers) == FACTS_IN_POST - 1

    run(app, body)


def test_describing_again_adds_to_the_earlier_description() -> None:
    app = make_app()
    first = "Single GPU run was fine. With DDP the loss oscillates."
    second = "fp16 with no GradScaler. The loss diverges now."

    async def body(pilot: Any) -> None:
        app.open_describe(first)
        await pilot.pause()
        await read_description(pilot)
        await pilot.press("ctrl+s")
        session = app.session
        assert set(session.answers) == {"single_gpu_converges", "loss_pattern"}
        app.open_describe(second)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DescribeScreen)
        assert "2" in str(screen.query_one("#describe-box").border_subtitle)  # 2 facts kept
        await read_description(pilot)
        found = screen.query_one("#describe-found", SelectionList)
        labels = [str(found.get_option_at_index(i).prompt) for i in range(found.option_count)]
        assert any("loss_pattern = diverges" in x and "replaces oscillates" in x for x in labels)
        await pilot.press("ctrl+s")
        answers = {k: o.value for k, o in session.answers.items()}
        assert answers == {
            "single_gpu_converges": True,  # from the first description, kept
            "loss_pattern": "diverges",  # read again: the newer value, shown before it counted
            "precision": "fp16_amp",
            "uses_grad_scaler": False,
        }
        assert session.descriptions == 2

    run(app, body)


def test_the_read_runs_in_a_worker_behind_an_indicator() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        app.open_describe(POST["en"])
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DescribeScreen)
        screen.action_read()  # the worker starts; the dialog says it is reading
        assert screen.reading and screen.query_one("#describe-reading").display
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert not screen.reading and not screen.query_one("#describe-reading").display
        assert len(screen.findings) == FACTS_IN_POST

    run(app, body)


# -- Chinese everywhere -------------------------------------------------------------------------
def _catalogue_keys() -> list[tuple[str, str]]:
    """Every literal the TUI passes to t() or shows as a key's description, with its file."""
    out = []
    for path in TUI.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # t(INTRO): a module-level constant passed by name
        named = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            # t("...") and a key binding's description, Binding(key, action, "...")
            if node.func.id == "t" and node.args:
                arg = node.args[0]
            elif node.func.id == "Binding" and len(node.args) >= 3:
                arg = node.args[2]
            else:
                continue
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append((path.name, arg.value))
            elif isinstance(arg, ast.Name) and arg.id in named:
                out.append((path.name, named[arg.id]))
    return out


def test_every_tui_string_has_its_chinese() -> None:
    keys = _catalogue_keys()
    assert len(keys) > 50  # the walk finds them
    missing = sorted({f"{name}: {key!r}" for name, key in keys if key not in ZH})
    assert not missing, "no zh for:\n" + "\n".join(missing)


def test_describe_screen_speaks_chinese() -> None:
    app = make_app("zh")

    async def body(pilot: Any) -> None:
        app.open_describe(POST["zh"])
        await pilot.pause()
        screen = app.screen
        intro = str(screen.query_one("#describe-intro", Paragraph).text)
        assert "用自己的话描述问题" in intro
        footer = {b.binding.description for b in screen.active_bindings.values()}
        assert {"读取", "使用勾选的事实"} <= footer
        await read_description(pilot)
        await pilot.press("ctrl+s")
        detail = app.session.answers["loss_pattern"].detail or ""
        assert detail.startswith("从你的描述") and "震荡" in detail

    run(app, body)


# -- snapshots at 80x24, English and Chinese ---------------------------------------------------
LANGS = ["en", "zh"]


@pytest.mark.parametrize("lang", LANGS)
def test_describe_list_snapshot(snap_compare: Any, lang: str) -> None:
    """A post with more facts than fit, scrolled to its end, the last line unticked."""

    async def read(pilot: Any) -> None:
        await pilot.pause()
        pilot.app.open_describe(POST[lang])
        await pilot.pause()
        await read_description(pilot)
        await pilot.press("end", "space")

    assert snap_compare(make_app(lang), terminal_size=SMALL, run_before=read)


@pytest.mark.parametrize("lang", LANGS)
def test_long_question_snapshot(snap_compare: Any, lang: str) -> None:
    """The words scroll in their box (scrollbar), the three choices stay below them."""
    assert snap_compare(make_app(lang), terminal_size=SMALL)


@pytest.mark.parametrize("lang", LANGS)
def test_number_question_snapshot(snap_compare: Any, lang: str) -> None:
    """The range in the field's hint, d for don't know, a refused value in one line."""
    assert snap_compare(make_app(lang), press=["d", "d", "0", "enter"], terminal_size=SMALL)


def test_b_steps_back_through_every_answer_dont_know_included() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        await pilot.press("d", "2")  # don't know, then "no" to calls_set_epoch
        panel = app.screen.query_one(QuestionPanel)
        await pilot.press("b")
        assert panel.prompt is not None and panel.prompt.fact == "calls_set_epoch"
        await pilot.press("b")
        assert panel.prompt is not None and panel.prompt.fact == "loss_divided_by_accum"
        assert panel.prompt.declined

    run(app, body)


def test_closing_the_describe_dialog_while_it_reads_is_safe() -> None:
    """Esc while the worker reads: a result (or a failure) that comes back after the dialog
    closed is dropped, never shown on a screen that is gone."""
    app = make_app()

    async def body(pilot: Any) -> None:
        app.open_describe(POST["en"])
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DescribeScreen)
        screen.action_read()
        await pilot.press("escape")
        await pilot.app.workers.wait_for_complete()
        assert isinstance(app.screen, DiagnoseScreen)
        findings, resemblance = describe.read_text(app.session.engine.kb, POST["en"])
        screen._show(findings, resemblance)  # as the worker hands them back, late
        screen._failed("late")
        await pilot.pause()
        assert isinstance(app.screen, DiagnoseScreen) and app.is_running
        assert app.session.answers == {} and not screen.reading

    run(app, body)


def test_ticked_and_unticked_differ_without_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()

    async def body(pilot: Any) -> None:
        app.open_describe(POST["en"])
        await pilot.pause()
        await read_description(pilot)
        found = app.screen.query_one("#describe-found", SelectionList)
        ticked = found.get_component_rich_style("selection-list--button-selected")
        unticked = found.get_component_rich_style("selection-list--button")
        assert app.no_color and ticked.reverse and not unticked.reverse

    run(app, body)
