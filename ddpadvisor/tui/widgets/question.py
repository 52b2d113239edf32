"""The question being asked: its text, its typed choices and "don't know", or a probe to run.

The question's words scroll in a box of bounded height, so a long question never pushes its
choices off the screen. A number is typed in a field that lets go: it takes only what a number
is written with, so every other key (d for "don't know", s, b, v, o ...) reaches the screen,
and Esc leaves the field for the choices below it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from ddpadvisor.i18n import t
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.tui.messages import AnswerChosen, QuestionSkipped, RunAsked
from ddpadvisor.tui.session import Prompt, format_value, step_of
from ddpadvisor.tui.widgets.error_line import ErrorLine
from ddpadvisor.tui.widgets.paragraph import Paragraph

DONT_KNOW = "dont-know"
SKIP = "skip"
RUN = "run"
ANSWER = "answer:"  # option ids of answers carry the value after this prefix

_BOOL_LABELS = {"true": "yes", "false": "no"}
DONT_KNOW_KEY = "d"  # not a digit: a number field lets it through, and 0 stays a number

# What a number is written with; any other key is left to the screen's bindings.
NUMBER_CHARS = {"int": set("0123456789-+"), "float": set("0123456789-+.eE")}


class AnswerInput(Input):
    """The typed answer. For an int or float it lets go of every key a number is not written
    with; for text it takes every printable key. Esc leaves it either way."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Leave the field", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind = "int"

    def _takes(self, character: str | None) -> bool:
        if character is None:
            return False
        chars = NUMBER_CHARS.get(self.kind)
        return character.isprintable() if chars is None else character in chars

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return self._takes(character)

    async def _on_key(self, event: events.Key) -> None:
        if event.is_printable and not self._takes(event.character):
            # Not typed (Input's own handler is skipped) and not stopped: the key bubbles up
            # to the screen, whose binding may take it.
            event.prevent_default()
            return

    def action_leave(self) -> None:
        self.post_message(self.Left())

    class Left(Message):
        """Esc in the field: the keyboard goes to the choices below it."""


class QuestionPanel(Vertical):
    """Shows one :class:`Prompt` and posts what the user chose; holds no session state."""

    DEFAULT_CLASSES = "panel"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prompt: Prompt | None = None
        self._values: list[str] = []  # answer values in the order of their number keys

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="q-words"):
            yield Paragraph(id="q-text")
            yield Paragraph(id="q-help", classes="muted")
        yield AnswerInput(id="q-input")
        yield OptionList(id="q-choices")
        yield ErrorLine(id="q-error")

    # -- showing ----------------------------------------------------------------------------
    def show(self, prompt: Prompt | None, *, settled: str | None = None) -> None:
        self.prompt = prompt
        text = self.query_one("#q-text", Paragraph)
        help_ = self.query_one("#q-help", Paragraph)
        entry = self.query_one("#q-input", AnswerInput)
        choices = self.query_one("#q-choices", OptionList)
        self.query_one("#q-error", ErrorLine).show("")
        self._values = []
        if prompt is None:
            self.border_title = t("Nothing left to ask")
            self.border_subtitle = settled or ""
            text.set_text(
                Content.assemble(
                    t("No question is worth asking any more. "),
                    ("f", "bold $text-accent"),
                    t(" shows the results and fixes, "),
                    ("o", "bold $text-accent"),
                    t(" adds evidence."),
                )
            )
            help_.display = False
            entry.display = False
            choices.clear_options()
            choices.display = False
            return
        self.border_title = _title(prompt)
        self.border_subtitle = (
            t("{settled} · more answers are optional", settled=settled) if settled else ""
        )
        text.set_text(Content(prompt.question))
        help_.set_text(Content(prompt.help or ""))
        help_.display = bool(prompt.help)
        options: list[Option] = []
        if prompt.how in ("probe", "trace"):
            action = (
                t("Run probe '{probe}' now", probe=prompt.probe)
                if prompt.how == "probe"
                else t("Trace my training script")
            )
            options = [
                _option(1, action, RUN),
                _option(2, t("Skip: ask something else"), SKIP),
            ]
            entry.display = False
        elif prompt.choices:
            for i, value in enumerate(prompt.choices, start=1):
                label = t(_BOOL_LABELS.get(value, value)) if prompt.type == "bool" else value
                current = prompt.current is not None and format_value(prompt.current) == value
                options.append(
                    _option(i, label + (t("  (current)") if current else ""), ANSWER + value)
                )
                self._values.append(value)
            options.append(_dont_know(prompt))
            entry.display = False
        else:
            entry.display = True
            entry.kind = prompt.type
            entry.value = "" if prompt.current is None else format_value(prompt.current)
            kind = t({"int": "a whole number", "float": "a number"}.get(prompt.type, "text"))
            limits = prompt.limits if prompt.type in NUMBER_CHARS else ""
            entry.placeholder = t(
                "{kind}{range} · Enter answers · Esc leaves the field",
                kind=kind,
                range=f" {limits}" if limits else "",
            )
            options = [_dont_know(prompt)]
        self.query_one("#q-words", VerticalScroll).scroll_home(animate=False)
        choices.set_options(options)
        choices.display = True
        choices.highlighted = self._current_index(prompt)

    def _current_index(self, prompt: Prompt) -> int:
        if prompt.current is not None and prompt.choices:
            value = format_value(prompt.current)
            if value in self._values:
                return self._values.index(value)
        return 0

    def show_error(self, message: str) -> None:
        self.query_one("#q-error", ErrorLine).show(message)

    def focus_answer(self) -> None:
        entry = self.query_one("#q-input", AnswerInput)
        if entry.display:
            entry.focus()
        else:
            self.query_one("#q-choices", OptionList).focus()

    # -- choosing ---------------------------------------------------------------------------
    def choose(self, number: int) -> bool:
        """Answer with the choice shown as ``number`` (0 = don't know, as d); False if none.
        For a number question the digit goes into its field instead."""
        if self.prompt is None:
            return False
        if self.prompt.how in ("probe", "trace"):
            if number == 1:
                self._post_choice(RUN)
                return True
            if number == 2:
                self._post_choice(SKIP)
                return True
            return False
        entry = self.query_one("#q-input", AnswerInput)
        if entry.display:
            # A digit typed while the keyboard is on the choices goes into the number field.
            entry.focus()
            entry.insert_text_at_cursor(str(number))
            return True
        if number == 0:
            self._post_choice(DONT_KNOW)
            return True
        if 1 <= number <= len(self._values):
            self._post_choice(ANSWER + self._values[number - 1])
            return True
        return False

    def dont_know(self) -> None:
        """Key d: "don't know" to a question; for a probe or trace step, "not now" (declined,
        so the next best step comes up instead)."""
        if self.prompt is not None:
            self._post_choice(DONT_KNOW if self.prompt.how == "ask" else SKIP)

    def _post_choice(self, choice: str) -> None:
        prompt = self.prompt
        if prompt is None:
            return
        if choice == RUN:
            self.post_message(RunAsked(prompt.how, prompt.probe))
        elif choice == SKIP:
            self.post_message(QuestionSkipped(prompt.fact, step_of(prompt)))
        elif choice == DONT_KNOW:
            self.post_message(AnswerChosen(prompt.fact, None))
        elif choice.startswith(ANSWER):
            self.post_message(AnswerChosen(prompt.fact, choice[len(ANSWER) :]))

    @on(OptionList.OptionSelected, "#q-choices")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_id:
            self._post_choice(event.option_id)

    @on(Input.Submitted, "#q-input")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = self.prompt
        if prompt is None:
            return
        raw = event.value.strip()
        if not raw:
            self.show_error(t('Type a value, or choose "don\'t know".'))
            return
        if prompt.type in ("int", "float"):
            try:
                float(raw) if prompt.type == "float" else int(raw)
            except ValueError:
                kind = t("a whole number" if prompt.type == "int" else "a number")
                self.show_error(
                    t(
                        "{fact} expects {kind}, got {raw}",
                        fact=prompt.fact,
                        kind=kind,
                        raw=repr(raw),
                    )
                )
                return
        self.post_message(AnswerChosen(prompt.fact, raw))

    def reject(self, problem: ValueProblem) -> None:
        self.show_error(str(problem))

    @on(AnswerInput.Left)
    def _left(self, event: AnswerInput.Left) -> None:
        event.stop()
        self.query_one("#q-choices", OptionList).focus()


def _option(key: int | str, label: str, option_id: str) -> Option:
    return Option(Content.assemble((f"{key} ", "bold $text-accent"), label), id=option_id)


def _dont_know(prompt: Prompt) -> Option:
    label = t("don't know") + (t("  (current)") if prompt.declined else "")
    return _option(DONT_KNOW_KEY, label, DONT_KNOW)


def _title(prompt: Prompt) -> str:
    if prompt.editing:
        return t("Change your answer · {fact}", fact=prompt.fact)
    kind = t(
        {"probe": "Next step: measure", "trace": "Next step: trace"}.get(prompt.how, "Question")
    )
    gain = (
        t(" · {gain} bits", gain=f"{prompt.expected_gain:.2f}")
        if prompt.expected_gain is not None
        else ""
    )
    return f"{kind}{gain}"
