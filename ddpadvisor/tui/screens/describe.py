"""Describe the problem: the user's own words (or a pasted forum post) read for facts.

Two steps in one dialog: type or paste the text, name the files you have (a training log,
trainer_state.json, a metrics CSV, a TensorBoard or ``lightning_logs/version_N`` folder, a
config or an environment dump, as ``--attach`` takes them) and, to compare with, a good run's
log, then press ctrl+r to read them (in a worker, with an indicator: the first read builds the
KB's indexes). The loss curves the files (and a log pasted in the text) hold are drawn first:
one line per rank (or file), the reference run beside them, the spikes and NaN/inf values the
readers detected marked, and each line's file and steps under the plot; a file that cannot be
read is one line. Then every fact found is listed with the phrase it came from, and below them
the causes the text reads like with the words they share, all ticked. The list scrolls, so
every line can be reached with the arrow keys and unticked with space; ctrl+s uses the ticked
lines, the facts as answers the history can still change, and attaches the files that were
read as ``--attach`` and ``--reference-log`` do. A second description adds to the first: its
facts join the earlier ones (a fact read again shows the value it replaces), and the causes
both read like are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, LoadingIndicator, SelectionList, Static, TextArea

from ddpadvisor.evidence.intake import Finding, described, extract
from ddpadvisor.i18n import t
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.resemblance import Resemblance
from ddpadvisor.observation import Observation
from ddpadvisor.terminal import shown
from ddpadvisor.tui.controller import Controller
from ddpadvisor.tui.curves import Curves, joined, read_curves, read_pasted
from ddpadvisor.tui.session import show_value
from ddpadvisor.tui.widgets.curves_plot import CurvesView
from ddpadvisor.tui.widgets.paragraph import Paragraph

INTRO = (
    "Describe the problem in your own words, or paste your forum post (English or 中文): "
    "GPUs, batch, precision, what the loss does, and your training loop if you can: code is "
    "scanned. ctrl+r reads it."
)


def finding_label(f: Finding, earlier: Observation | None = None) -> Content:
    replaces = (
        t("  (replaces {value})", value=show_value(earlier.value))
        if earlier is not None and earlier.value != f.value
        else ""
    )
    return Content.assemble(
        (f"{f.fact} = {show_value(f.value)}", "bold"),
        (replaces, "$text-warning"),
        "  \u2190 ",
        (t("code") + " ", "italic") if f.origin == "code" else "",
        f"\u201c{f.phrase}\u201d",
    )


FILES_HINT = "files or folders you have: train.log trainer_state.json runs/ …"
REFERENCE_HINT = "a good run's log to compare with (optional)"
SHOWN_RESEMBLANCE = 3  # causes the text reads like, offered below its facts
DIALOG_HEIGHT = 0.9  # a dialog's max-height (.dialog in app.tcss)


def resemblance_label(r: Resemblance) -> Content:
    return Content.assemble(
        (t("reads like {cause}", cause=r.cause), "bold"),
        f" ({r.score:.2f})  \u2190 ",
        ", ".join(r.words),
    )


def read_text(kb: KnowledgeBase, text: str) -> tuple[list[Finding], list[Resemblance]]:
    """The facts ``text`` states and the causes it reads like (slow the first time)."""
    return extract(kb, text), described(kb, [text])[:SHOWN_RESEMBLANCE]


def paths_in(typed: str) -> list[str]:
    """The ``[KIND:]PATH`` values typed or pasted in a files field: separated by spaces,
    quoted or backslash-escaped where a name holds one (as a terminal pastes a dropped file);
    ``~`` is the home folder."""
    import shlex

    try:
        words = shlex.split(typed)
    except ValueError:  # an unbalanced quote: take the words as they are
        words = typed.split()
    out = []
    for word in words:
        kind, sep, rest = word.partition(":")
        if sep and rest and kind.isalpha() and len(kind) > 1:  # KIND:PATH (never C:\...)
            out.append(f"{kind}:{Path(rest).expanduser()}")
        else:
            out.append(str(Path(word).expanduser()))
    return out


class DescribeScreen(ModalScreen[int | None]):
    """Dismisses with the number of confirmed facts, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "read", "Read it"),
        Binding("ctrl+s", "confirm", "Use ticked facts"),
        Binding("escape", "close", "Back"),
    ]

    def __init__(self, controller: Controller, text: str = "") -> None:
        super().__init__()
        self.controller = controller
        self.initial = text
        self.findings: list[Finding] = []
        self.resemblance: list[Resemblance] = []
        self.curves = Curves()
        self.reading = False
        self.pasted: Path | None = None  # a private folder for a log pasted in the text
        self.reads = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="describe-box", classes="panel dialog"):
            yield Paragraph(t(INTRO), id="describe-intro")  # Chinese wraps by cells
            yield TextArea(self.initial, id="describe-text", soft_wrap=True)
            yield Input(placeholder=t(FILES_HINT), id="describe-files", compact=True)
            yield Input(placeholder=t(REFERENCE_HINT), id="describe-reference", compact=True)
            yield Static("", id="describe-status")
            yield LoadingIndicator(id="describe-reading")
            yield CurvesView(id="describe-curves")
            yield SelectionList[int](id="describe-found")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.controller.localise(self)
        box = self.query_one("#describe-box")
        box.border_title = t("Describe the problem")
        earlier = self.earlier()
        if earlier:
            box.border_subtitle = t(
                "adds to your earlier description ({n} facts kept)", n=len(earlier)
            )
        self.query_one("#describe-found", SelectionList).display = False
        self.query_one("#describe-reading").display = False
        self.query_one("#describe-curves").display = False
        text = self.query_one("#describe-text", TextArea)
        text.cursor_blink = False
        text.focus()

    def earlier(self) -> dict[str, Observation]:
        """Answers that came from an earlier description, by fact."""
        return self.controller.session.described_answers()

    # -- reading ----------------------------------------------------------------------------
    def files(self) -> tuple[list[str], list[str]]:
        """The files typed in the two fields: the run's own, and the reference run's."""
        return (
            paths_in(self.query_one("#describe-files", Input).value),
            paths_in(self.query_one("#describe-reference", Input).value),
        )

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_read()

    def action_read(self) -> None:
        if self.reading:
            return
        text = self.query_one("#describe-text", TextArea).text
        attach, reference = self.files()
        self.reading = True
        self.query_one("#describe-status", Static).update(
            t("Reading your description and files…")
            if attach or reference
            else t("Reading your description…")
        )
        self.query_one("#describe-reading").display = True
        self.query_one("#describe-found", SelectionList).display = False
        self.query_one("#describe-curves").display = False
        self._read(text, attach, reference)

    @work(thread=True, exclusive=True, group="describe-read", exit_on_error=False)
    def _read(self, text: str, attach: list[str], reference: list[str]) -> None:
        kb = self.controller.session.engine.kb
        try:
            curves = read_curves(kb, attach, reference)
            pasted = self._pasted_log(kb, text)
            findings, resemblance = read_text(kb, text) if text.strip() else ([], [])
        except Exception as exc:  # a reader bug must not take the session down
            self.app.call_from_thread(self._failed, str(exc))
            return
        self.app.call_from_thread(self._show, findings, resemblance, curves, pasted)

    def _pasted_log(self, kb: KnowledgeBase, text: str) -> Curves:
        """The curve of a log pasted in the text; none when there is none, or when its
        private copy cannot be written (the words are still read)."""
        if not text.strip():
            return Curves()
        try:
            return read_pasted(kb, text, self._paste_folder())
        except OSError:
            return Curves()

    def _paste_folder(self) -> Path:
        """A new folder for each read (the reader caches a file by name, size and time)."""
        import tempfile

        if self.pasted is None:
            self.pasted = Path(tempfile.mkdtemp(prefix="ddpadvisor-pasted-"))
        self.reads += 1
        return self.pasted / str(self.reads)

    def on_unmount(self) -> None:
        if self.pasted is not None:  # its facts were read when attached: the copy goes
            import shutil

            shutil.rmtree(self.pasted, ignore_errors=True)

    def _failed(self, problem: str) -> None:
        self.reading = False
        if not self.is_attached:  # closed while it was reading
            return
        self.query_one("#describe-reading").display = False
        self.query_one("#describe-status", Static).update(
            Content(t("Could not read it: {problem}", problem=shown(problem, one_line=True)))
        )

    def _show(
        self,
        findings: list[Finding],
        resemblance: list[Resemblance],
        curves: Curves | None = None,
        pasted: Curves | None = None,
    ) -> None:
        self.reading = False
        if not self.is_attached:  # closed while it was reading: nothing to show
            return
        self.findings, self.resemblance = findings, resemblance
        files, pasted = curves or Curves(), pasted or Curves()
        self.curves = joined(pasted, files)
        self.query_one("#describe-reading").display = False
        view = self.query_one("#describe-curves", CurvesView)
        view.show(self.curves)
        found = self.query_one("#describe-found", SelectionList)
        found.clear_options()
        status = self.query_one("#describe-status", Static)
        said = self._files_status(files, pasted)
        if not self.findings and not self.resemblance:
            found.display = False
            if self.curves.readable:
                self.query_one("#describe-box").add_class("-read")
                status.update(t("{files} ctrl+s attaches them.", files=said))
                self.call_after_refresh(self._fit_list)
                view.focus()
                return
            status.update(t("Nothing recognised. Add details, or Esc to answer questions instead."))
            self.query_one("#describe-box").remove_class("-read")
            self.call_after_refresh(self._fit_list)
            return
        n = len(self.findings)
        earlier = self.earlier()
        found.add_options(
            [(finding_label(f, earlier.get(f.fact)), i, True) for i, f in enumerate(self.findings)]
        )
        found.add_options(
            [(resemblance_label(r), n + i, True) for i, r in enumerate(self.resemblance)]
        )
        # The text box shrinks so the list has the room: every line stays reachable.
        self.query_one("#describe-box").add_class("-read")
        found.display = True
        self.call_after_refresh(self._fit_list)
        status.update(
            t(
                "Found {n} facts. Untick any that are wrong (space), then ctrl+s to use the rest.",
                n=len(self.findings),
            )
            + (f" {said}" if said else "")
        )
        found.highlighted = 0
        found.focus()

    @staticmethod
    def _files_status(files: Curves, pasted: Curves) -> str:
        """How many of the named files were read and the curves they hold, and whether the
        text holds a log ("" for neither)."""
        said = []
        named = len(files.readable) + len(files.problems)
        if named:
            said.append(
                t(
                    "{read} of {named} files read, {lines} loss curves.",
                    read=len(files.readable),
                    named=named,
                    lines=len(files.lines),
                )
            )
        if pasted.lines:
            said.append(t("Your text holds a training log: its loss is drawn."))
        return " ".join(said)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit_list)

    def _fit_list(self) -> None:
        """The list's height: what the dialog (at most 90% of the screen) leaves it, so that it
        scrolls inside the dialog instead of running past the dialog's edge."""
        found = self.query_one("#describe-found", SelectionList)
        view = self.query_one("#describe-curves", CurvesView)
        box = self.query_one("#describe-box")
        # the dialog's max-height is a share of what the footer leaves of the screen
        footer = self.query_one(Footer).outer_size.height
        room = int((self.size.height - footer) * DIALOG_HEIGHT) - box.styles.gutter.height
        for child in box.children:
            if child not in (found, view) and child.display:
                room -= child.outer_size.height + max(
                    child.styles.margin.top, child.styles.margin.bottom
                )
        if view.display:
            # the curves first, as tall as they need when the list still keeps 3 lines, else
            # they scroll in their box (never under 6 lines: the legend and a plot)
            need = view.virtual_size.height or view.needed()
            rest = 3 if found.display else 0
            height = max(6, min(need, room - rest))
            view.styles.height = height
            room -= height
        found.styles.max_height = max(3, room)

    # -- confirming -------------------------------------------------------------------------
    def confirmed(self) -> list[Finding]:
        found = self.query_one("#describe-found", SelectionList)
        return [self.findings[i] for i in found.selected if i < len(self.findings)]

    def confirmed_resemblance(self) -> list[Resemblance]:
        found = self.query_one("#describe-found", SelectionList)
        n = len(self.findings)
        return [self.resemblance[i - n] for i in found.selected if i >= n]

    def action_confirm(self) -> None:
        if self.reading:
            self.notify(t("Still reading your description…"), timeout=2)
            return
        if not self.findings and not self.resemblance and not self.curves.readable:
            self.action_read()
            return
        chosen = self.confirmed()
        if self.findings or self.resemblance:
            self.controller.describe(chosen, self.confirmed_resemblance())
        for value, reference in self.curves.readable:
            kind = "reference" if reference else "attach"
            problem = self.controller.load_evidence(kind, Path(value))
            if problem:  # changed since it was read: said, and the rest still loaded
                self.notify(shown(problem, one_line=True), severity="error", timeout=6)
        self.dismiss(len(chosen))

    def action_close(self) -> None:
        self.dismiss(None)
