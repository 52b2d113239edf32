"""The state of one interactive diagnosis, kept free of textual so it can be driven headless.

A session is a list of observations (loaded from sources, measured by runs started in the TUI,
and answers typed in the TUI) plus the facts the user declined to answer. Every change asks the
engine for a fresh :class:`Diagnosis`; nothing here ranks or scores causes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.errors import InputError
from ddpadvisor.evidence.gather import Sources, gather
from ddpadvisor.evidence.sources import Series
from ddpadvisor.i18n import Lang, t, text
from ddpadvisor.kb.resemblance import Resemblance
from ddpadvisor.kb.schema import Fact
from ddpadvisor.kb.values import ValueProblem, parse_value
from ddpadvisor.observation import Gathered, Observation
from ddpadvisor.report.models import Diagnosis, QuestionOut
from ddpadvisor.report.present import choices_of, diagnose
from ddpadvisor.report.text import render_markdown

TUI_WHERE = "tui"  # `where` of every answer typed in the TUI, so a saved session can restore them


@dataclass(frozen=True)
class Prompt:
    """What the question panel shows: the engine's next question, or an earlier one to edit."""

    fact: str
    question: str
    type: str
    choices: list[str] | None
    help: str | None
    how: str  # ask | probe | trace | scan
    probe: str | None = None
    expected_gain: float | None = None
    current: Any = None  # the answer given before, when editing
    editing: bool = False
    declined: bool = False  # "don't know" was the answer given before, when editing
    limits: str = ""  # a number fact's range as the entry's hint shows it (">= 1")


def step_of(prompt: Prompt) -> str | None:
    """The next-step id a prompt stands for (``probe:NAME``, ``trace``, ``scan``), None for a
    question."""
    if prompt.how == "probe":
        return f"probe:{prompt.probe}"
    return prompt.how if prompt.how in ("trace", "scan") else None


@dataclass
class LoadedSource:
    kind: str  # answers | script | trace | probe | session | attach | reference
    path: Path
    count: int


@dataclass
class Session:
    engine: Engine
    gpu_available: bool | None = None
    loaded: list[Observation] = field(default_factory=list)
    measured: list[Observation] = field(default_factory=list)
    answers: dict[str, Observation] = field(default_factory=dict)  # insertion order = history
    declined: set[str] = field(default_factory=set)  # "don't know" or skipped: not asked again
    verified: dict[str, str] = field(default_factory=dict)  # fix id -> failed | passed
    # causes the user's own description reads like, as they confirmed them
    resemblance: list[Resemblance] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[LoadedSource] = field(default_factory=list)
    trace_dirs: list[Path] = field(default_factory=list)
    attached: list[str] = field(default_factory=list)  # [KIND:]FILE given to the attach source
    references: list[str] = field(default_factory=list)  # a good run's logs, compared
    # the series of each attached file as read when it was attached, for the plots:
    # (name, reference?, series)
    series: list[tuple[str, bool, Series]] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    lang: Lang = "en"  # of the diagnosis' text; switching it keeps every answer
    described: set[str] = field(default_factory=set)  # facts whose answer a description gave
    descriptions: int = 0  # descriptions confirmed so far
    asked: list[str] = field(default_factory=list)  # facts answered or declined here, in order

    def __post_init__(self) -> None:
        self.refresh()

    # -- evidence ---------------------------------------------------------------------------
    def observations(self) -> list[Observation]:
        # Answers last: within the "answer" level the later one wins, so the TUI overrides a file.
        return [*self.loaded, *self.measured, *self.answers.values()]

    def refresh(self) -> Diagnosis:
        self.diagnosis = diagnose(
            self.engine,
            self.observations(),
            warnings=self.warnings,
            gpu_available=self.gpu_available,
            lang=self.lang,
            declined=sorted(self.declined),
            verified=self.verified,
            resemblance=self.resemblance,
        )
        return self.diagnosis

    def set_lang(self, lang: Lang) -> Diagnosis:
        """Speak ``lang`` from now on: the same evidence, re-rendered."""
        self.lang = lang
        return self.refresh()

    @property
    def current(self) -> Diagnosis:
        assert self.diagnosis is not None
        return self.diagnosis

    def verify_result(self, fix_id: str, outcome: str) -> Diagnosis:
        """Record the outcome of a fix's verify command (failed / passed)."""
        self.verified[fix_id] = outcome
        return self.refresh()

    def add_gathered(self, got: Gathered, kind: str, path: Path | None) -> Diagnosis:
        self.loaded.extend(got.observations)
        self.declined.update(got.declined)
        self.verified.update(got.verified)
        if got.resemblance:
            self.resemblance = list(got.resemblance)
        self.warnings.extend(got.warnings)
        if path is not None:
            self.sources.append(LoadedSource(kind, path, len(got.observations)))
            if kind == "trace":
                self.trace_dirs.append(path)
        return self.refresh()

    def add_measured(self, got: Gathered, kind: str, out_dir: Path | None) -> Diagnosis:
        self.measured.extend(got.observations)
        self.warnings.extend(got.warnings)
        if out_dir is not None:
            self.sources.append(LoadedSource(kind, out_dir, len(got.observations)))
            if kind == "trace":
                self.trace_dirs.append(out_dir)
        return self.refresh()

    def load(self, kind: str, path: Path) -> Diagnosis:
        """Load one source; raises InputError (one line) for bad input or a missing reader."""
        if kind == "answers" and path.suffix.lower() == ".json" and _is_saved_session(path):
            return self.load_saved(path)
        if kind in ("attach", "reference"):
            return self.attach(path, reference=kind == "reference")
        sources = Sources()
        target = {
            "answers": sources.answers,
            "script": sources.scripts,
            "trace": sources.traces,
            "probe": sources.probe_results,
        }.get(kind)
        if target is None:
            raise InputError(f"unknown kind of evidence {kind!r}")
        if not path.exists():
            raise InputError("no such file or folder", path)
        target.append(path)
        try:
            got = gather(self.engine.kb, sources)
        except ImportError as exc:
            raise InputError(
                f"reading {kind} evidence is not available in this build ({exc})"
            ) from None
        return self.add_gathered(got, kind, path)

    def attach(self, path: Path | str, *, reference: bool = False) -> Diagnosis:
        """A file or folder the user has (``[KIND:]PATH``, as ``--attach`` takes it), or with
        ``reference`` a good run's log compared with the files attached so far (as
        ``--reference-log``). Raises InputError (one line) for a file that cannot be read."""
        from ddpadvisor.evidence.sources import attached_path, by_name

        value = str(path)
        real = attached_path(value)
        if not real.exists() and not real.is_symlink():
            raise InputError("no such file or folder", real)
        source = by_name("reference" if reference else "attach")
        got = source.gather(self.engine.kb, [value], Sources(attach=list(self.attached)))
        (self.references if reference else self.attached).append(value)
        read = by_name("attach").series
        # read above (cached): a file that changed since is left out of the plots
        if read is not None:
            with contextlib.suppress(InputError):
                self.series.append((real.name, reference, read(Path(value))))
        return self.add_gathered(got, source.name, real)

    def load_saved(self, path: Path) -> Diagnosis:
        """Restore the evidence of a diagnosis exported as JSON (the ``--json`` document)."""
        from pydantic import ValidationError

        from ddpadvisor.yamlio import load_json

        try:
            saved = Diagnosis.model_validate(load_json(path))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise InputError(f"not a ddpadvisor diagnosis: {loc}: {err['msg']}", path) from None
        restored = 0
        for fact in saved.facts:
            obs = Observation(
                fact=fact.fact,
                value=fact.value,
                source=fact.source,  # type: ignore[arg-type]
                where=fact.where,
                detail=fact.detail,
            )
            if fact.source == "answer" and fact.where == TUI_WHERE:
                self.answers[fact.fact] = obs
            else:
                self.loaded.append(obs)
            # Values the winner overrode still matter: they produce the same warnings again.
            for old in fact.superseded:
                self.loaded.append(
                    Observation(
                        fact=fact.fact,
                        value=old.value,
                        source=old.source,  # type: ignore[arg-type]
                        where=old.where,
                    )
                )
            restored += 1
        # "Don't know" and verify outcomes are part of the session too.
        self.declined.update(saved.declined)
        self.verified.update(saved.verified)
        if saved.resemblance:
            self.resemblance = [
                Resemblance(r.cause, r.score, tuple(r.words), r.standout) for r in saved.resemblance
            ]
        self.sources.append(LoadedSource("session", path, restored))
        return self.refresh()

    # -- answers ----------------------------------------------------------------------------
    def answer(self, fact_id: str, raw: Any) -> Diagnosis:
        """Record the user's answer; ``None``/"unknown" means "don't know" and removes it.

        Raises ValueProblem when the value does not fit the fact's type.
        """
        fact = self.engine.kb.facts.get(fact_id)
        if fact is None:
            raise ValueProblem(f"unknown fact {fact_id!r}")
        check_range(fact, raw)
        value = parse_value(fact, raw)
        if fact_id not in self.asked:
            self.asked.append(fact_id)
        self.described.discard(fact_id)
        if value is None:
            self.answers.pop(fact_id, None)
            self.declined.add(fact_id)
        else:
            # Assigning to an existing key keeps its place in the history.
            self.answers[fact_id] = Observation(
                fact=fact_id, value=value, source="answer", where=TUI_WHERE
            )
            self.declined.discard(fact_id)
        return self.refresh()

    def answer_described(
        self, findings: list[Any], resemblance: list[Resemblance] | None = None
    ) -> Diagnosis:
        """Facts the user confirmed from their own description (``intake.Finding``s), and the
        causes they agreed it reads like. A later description adds to the earlier ones: its
        facts join theirs (the same fact read again takes the newer value, which the describe
        screen shows before it counts), and a cause both read like keeps the stronger match."""
        if resemblance:
            merged = {r.cause: r for r in self.resemblance}
            for r in resemblance:
                old = merged.get(r.cause)
                if old is None or r.score > old.score:
                    merged[r.cause] = r
            self.resemblance = sorted(merged.values(), key=lambda r: -r.score)
        for f in findings:
            self.answers[f.fact] = Observation(
                fact=f.fact,
                value=f.value,
                source="answer",
                where=TUI_WHERE,
                detail=t("from your description: \u201c{phrase}\u201d", phrase=f.phrase),
            )
            self.declined.discard(f.fact)
            self.described.add(f.fact)
            if f.fact not in self.asked:
                self.asked.append(f.fact)
        self.descriptions += 1
        return self.refresh()

    def described_answers(self) -> dict[str, Observation]:
        """The answers that came from a description (and were not changed since), by fact."""
        return {f: obs for f, obs in self.answers.items() if f in self.described}

    def skip(self, fact_id: str, step: str | None = None) -> Diagnosis:
        """Decline a question (its fact is never asked again) or, given ``step``, a probe,
        trace or scan step: the step is not offered again, and the facts it would have
        measured can still be asked of the user."""
        self.declined.add(step or fact_id)
        if step is None and fact_id not in self.asked:
            self.asked.append(fact_id)
        return self.refresh()

    def history(self) -> list[Observation]:
        return list(self.answers.values())

    def history_order(self) -> list[str]:
        """Every fact the user answered or said "don't know" to, in the order first given
        (answers from a loaded file first), so that any of them can be revisited."""
        facts = self.engine.kb.facts
        given = [f for f in self.asked if f in self.answers or f in self.declined]
        earlier = [f for f in self.answers if f not in given]
        earlier += sorted(f for f in self.declined if f in facts and f not in given)
        return [*earlier, *given]

    # -- questions --------------------------------------------------------------------------
    def next_prompt(self) -> Prompt | None:
        """The engine's best next question among those not answered or declined."""
        question = self.next_question()
        if question is None:
            return None
        fact = self.engine.kb.facts.get(question.fact)
        limits = range_text(fact) if fact is not None else ""
        return _prompt_from_question(question, limits)

    def next_question(self) -> QuestionOut | None:
        observed = {f.fact for f in self.current.facts}
        for q in self.current.next_questions:
            if q.fact not in self.declined and q.fact not in observed:
                return q
        return None

    def edit_prompt(self, fact_id: str) -> Prompt:
        fact = self.engine.kb.facts[fact_id]
        obs = self.answers.get(fact_id)
        return Prompt(
            fact=fact.id,
            question=text(fact, "question", self.lang),
            type=fact.type,
            choices=choices_of(fact),
            help=text(fact, "help", self.lang),
            how="ask",
            current=obs.value if obs else None,
            editing=True,
            declined=fact_id in self.declined,
            limits=range_text(fact),
        )

    # -- export -----------------------------------------------------------------------------
    def to_json(self) -> str:
        """Exactly the document ``ddpadvisor --json`` prints for the same evidence."""
        return self.current.model_dump_json(indent=2) + "\n"

    def to_markdown(self) -> str:
        return render_markdown(self.current)

    def export(self, path: Path, fmt: str) -> Path:
        text = self.to_json() if fmt == "json" else self.to_markdown()
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", path) from None
        return path


def value_range(fact: Fact) -> tuple[float | None, float | None, bool, bool]:
    """A number fact's range as the KB declares it: (low, high, low included, high included);
    None leaves that side open."""
    low, low_in = (fact.min, True) if fact.min is not None else (fact.exclusive_min, False)
    high, high_in = (fact.max, True) if fact.max is not None else (fact.exclusive_max, False)
    return low, high, low_in, high_in


def range_text(fact: Fact) -> str:
    """The range as the question's hint shows it (">= 1", "0 <= x < 1"), "" when open."""
    if fact.type not in ("int", "float"):
        return ""
    low, high, low_in, high_in = value_range(fact)

    def shown(x: float) -> str:
        return format_value(int(x) if float(x).is_integer() else x)

    if low is not None and high is not None:
        return f"{shown(low)} {'<=' if low_in else '<'} x {'<=' if high_in else '<'} {shown(high)}"
    if low is not None:
        return f"{'>=' if low_in else '>'} {shown(low)}"
    if high is not None:
        return f"{'<=' if high_in else '<'} {shown(high)}"
    return ""


def check_range(fact: Fact, raw: object) -> None:
    """Raise ValueProblem (one line, in the current language) for a number outside the fact's
    range; anything that is not a number is left to ``parse_value``."""
    if fact.type not in ("int", "float") or isinstance(raw, bool):
        return
    value: object = raw
    if isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            try:
                value = float(raw.strip())
            except ValueError:
                return
    if not isinstance(value, int | float) or value != value:
        return
    low, high, low_in, high_in = value_range(fact)
    ok = (low is None or (value >= low if low_in else value > low)) and (
        high is None or (value <= high if high_in else value < high)
    )
    if not ok:
        raise ValueProblem(
            t(
                "{fact} must be {range}, got {value}",
                fact=fact.id,
                range=range_text(fact),
                value=format_value(value),
            )
        )


def _prompt_from_question(q: QuestionOut, limits: str = "") -> Prompt:
    return Prompt(
        fact=q.fact,
        question=q.question,
        type=q.type,
        choices=q.choices,
        help=q.help,
        how=q.how,
        probe=q.probe,
        expected_gain=q.expected_gain,
        limits=limits,
    )


def _is_saved_session(path: Path) -> bool:
    """A saved diagnosis has these top-level keys; an answers file maps fact ids to values."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "schema_version" in data and "causes" in data


def format_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def show_value(value: object) -> str:
    """A value as the user reads it: true/false in English, 是/否 in Chinese."""
    from ddpadvisor.i18n import current, value_label

    return format_value(value) if current() == "en" else value_label(value)
