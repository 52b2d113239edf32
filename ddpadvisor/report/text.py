"""Plain-text and Markdown renderings of a :class:`Diagnosis` (presentation only).

Both follow the diagnosis' own language (``d.lang``): its text fields already are in it, and
the fixed labels come from the catalogue in :mod:`ddpadvisor.i18n`. Wrapping counts terminal
cells, so Chinese (two cells a character, no spaces between words) wraps at the same width.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

from ddpadvisor.i18n import Lang, t, value_label
from ddpadvisor.report.models import CauseOut, Diagnosis

WIDTH = 96
# Runs of non-space text that are not CJK stay whole; each CJK character may end a line, but
# never right before closing punctuation (nor right after opening punctuation).
_TOKEN = re.compile(
    r"\s+|[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]+"
)
_CLOSING = set("，。；：、！？）》」』】,.;:!?)")
_OPENING = set("（《「『【(")


def cells(s: str) -> int:
    """Terminal cells ``s`` takes: wide and full-width characters count two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def wrap(text: str, width: int = WIDTH, indent: str = "", subsequent: str = "      ") -> list[str]:
    """Greedy wrap by cells: spaces break lines, and so does any CJK character."""
    tokens: list[str] = []
    for tok in _TOKEN.findall(text):
        glue = tokens and not tokens[-1].isspace() and not tok.isspace()
        if glue and (tok[0] in _CLOSING or tokens[-1][-1] in _OPENING):
            tokens[-1] += tok
            continue
        tokens.append(tok)
    lines: list[str] = []
    cur, cur_w = indent, cells(indent)
    fresh = True  # nothing but the indent on this line yet
    for tok in tokens:
        if tok.isspace():
            if not fresh:
                cur += " "
                cur_w += 1
            continue
        w = cells(tok)
        if not fresh and cur_w + w > width:
            lines.append(cur.rstrip())
            cur, cur_w, fresh = subsequent, cells(subsequent), True
        cur += tok
        cur_w += w
        fresh = False
    if not fresh or not lines:
        lines.append(cur.rstrip())
    return lines


def _bar(score: float, width: int = 20) -> str:
    n = round(score * width)
    return "#" * n + "." * (width - n)


def _wrapper(lang: Lang):  # type: ignore[no-untyped-def]
    """English wraps as it always did (textwrap); Chinese by cells."""
    if lang == "en":
        w = textwrap.TextWrapper(width=WIDTH, subsequent_indent="      ")
        return w.wrap

    def wrap_zh(s: str, subsequent: str = "      ") -> list[str]:
        body = s.lstrip(" ")
        return wrap(body, WIDTH, indent=s[: len(s) - len(body)], subsequent=subsequent)

    return wrap_zh


def _evidence_lines(cause: CauseOut, lang: Lang, limit: int = 4) -> list[str]:
    out = []
    for ev in cause.evidence[:limit]:
        sign = "+" if ev.direction == "for" else "-"
        where = f" @ {ev.where}" if ev.where else ""
        via = f" {t('via', lang)} {ev.path[1].split(':', 1)[1]}" if len(ev.path) == 3 else ""
        detail = f" — {ev.detail}" if ev.detail else ""
        value = value_label(ev.value, lang) if lang != "en" else _v(ev.value)
        source = t(ev.source, lang)
        out.append(f"{sign}{abs(ev.size):.1f} {ev.fact}={value} [{source}{where}]{via}{detail}")
    return out


def _v(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _show(value: object, lang: Lang) -> str:
    return _v(value) if lang == "en" else value_label(value, lang)


def _join(text: str, lang: Lang) -> str:
    """A folded YAML paragraph on one line (translations are written on one line already)."""
    return " ".join(text.split())


def _label(msg: str, lang: Lang) -> str:
    """A label and what separates it from its value (a full-width colon needs no space)."""
    label = t(msg, lang)
    return label if label.endswith("：") else label + " "


RUN_FAILED = (
    "A probe or trace run failed (exit 3): the ranking below rests only on what it recorded "
    "before; the warnings at the end say which rank and why."
)


def render_text(d: Diagnosis, *, top: int = 5) -> str:
    lang = d.lang
    wrap_ = _wrapper(lang)
    lines = [f"ddpadvisor {d.version} — {d.summary}", ""]
    if d.run_failed:
        lines.extend(wrap_("  ! " + t(RUN_FAILED, lang)))
        lines.append("")
    lines.append(
        t("Ranked causes (score = posterior probability; evidence sizes are log10 LR):", lang)
    )
    for c in d.causes[:top]:
        lines.append(f"{c.rank:>2}. {_bar(c.score)} {c.score:6.1%}  {c.id}")
        lines.append(f"      {c.title}")
        if c.mode is not None:
            lines.extend(wrap_("      " + t("in this way: {mode}", lang, mode=c.mode.title)))
        for e in _evidence_lines(c, lang):
            lines.extend(wrap_(f"      {e}"))
    lead = next((c for c in d.causes if not c.catch_all), None)
    if lead is not None and lead.fixes and d.causes[0].id == lead.id:
        lines += ["", t("Why {cause}:", lang, cause=lead.id)]
        lines.extend(wrap_("      " + _join(lead.mechanism, lang)))
        for fix in lead.fixes:
            lines += ["", t("Fix: {title}", lang, title=fix.title)]
            for step in fix.steps:
                lines.extend(wrap_(f"  - {step}", "    ") if lang != "en" else [f"  - {step}"])
            if fix.code:
                if fix.code.before:
                    lines.append("  " + t("before:", lang))
                    lines.extend("    " + ln for ln in fix.code.before.rstrip().splitlines())
                lines.append("  " + t("after:", lang))
                lines.extend("    " + ln for ln in fix.code.after.rstrip().splitlines())
            lines.append(f"  {_label('verify:', lang)}{fix.verify.command}")
            lines.extend(wrap_(f"  {_label('expect:', lang)}{fix.verify.expect}"))
    if d.next_steps:
        lines += ["", t("Most informative next steps:", lang)]
        for st in d.next_steps[:5]:
            what = f"{st.fact}: {st.title}" if st.kind == "ask" else st.title
            gain = t("gain {gain} bits", lang, gain=f"{st.expected_gain:.2f}")
            lines.extend(wrap_(f"  [{st.id}] {what} ({gain})"))
            if st.command:
                lines.append(f"      {st.command}")
    if d.claims:
        lines += ["", t("Forum advice, judged on this evidence:", lang)]
        for cl in d.claims[:12]:
            stance = t(cl.stance.upper().replace("-", " "), lang)
            stance = f"{cl.stance.upper():9}" if lang == "en" else stance
            verdict = t(cl.verdict, lang)
            lines.extend(wrap_(f"  {stance} [{verdict}] {cl.text} ({', '.join(cl.provenance)})"))
    if d.facts:
        lines += ["", t("Facts used:", lang)]
        for f in d.facts:
            where = f" @ {f.where}" if f.where else ""
            lines.append(f"  {f.fact} = {_show(f.value, lang)} [{t(f.source, lang)}{where}]")
    if d.warnings:
        lines += ["", t("Warnings:", lang)]
        lines.extend(f"  ! {x}" for x in d.warnings)
    return "\n".join(lines) + "\n"


def render_markdown(d: Diagnosis, *, top: int = 5) -> str:
    lang = d.lang
    md = [
        f"# {t('ddpadvisor diagnosis', lang)}",
        "",
        f"_{d.summary}_",
        *(["", f"**{t(RUN_FAILED, lang)}**"] if d.run_failed else []),
        "",
        f"## {t('Ranked causes', lang)}",
        "",
        f"| # | {t('cause', lang)} | {t('score', lang)} | {t('strongest evidence', lang)} |",
        "|---|---|---|---|",
    ]
    for c in d.causes[:top]:
        ev = "; ".join(_evidence_lines(c, lang, 2)).replace("|", "\\|") or "—"
        way = f" ({t('in this way: {mode}', lang, mode=c.mode.title)})" if c.mode else ""
        md.append(f"| {c.rank} | `{c.id}` {c.title}{way} | {c.score:.1%} | {ev} |")
    for c in d.causes[:top]:
        if c.catch_all or not c.fixes:
            continue
        md += ["", f"## {c.id}", "", _join(c.mechanism, lang), ""]
        for fix in c.fixes:
            md.append(f"### {t('Fix: {title}', lang, title=fix.title)}")
            md.extend(f"- {s}" for s in fix.steps)
            if fix.code:
                if fix.code.before:
                    md += ["", t("Before:", lang), "```python", fix.code.before.rstrip(), "```"]
                md += ["", t("After:", lang), "```python", fix.code.after.rstrip(), "```"]
            md += ["", f"{_label('Verify:', lang)}`{fix.verify.command}` — {fix.verify.expect}", ""]
        if c.references:
            md.append(t("References:", lang) + " " + ", ".join(c.references))
    if d.next_steps:
        md += ["", f"## {t('Next steps', lang)}", ""]
        md.extend(
            f"- **{st.id}**: {st.title} — "
            + t("gain {gain} bits", lang, gain=f"{st.expected_gain:.2f}")
            + (f" — `{st.command}`" if st.command else "")
            for st in d.next_steps
        )
    if d.claims:
        md += [
            "",
            f"## {t('Forum advice', lang)}",
            "",
            f"| {t('stance', lang)} | {t('verdict', lang)} | {t('advice', lang)} "
            f"| {t('source', lang)} |",
            "|---|---|---|---|",
        ]
        md.extend(
            f"| {t(cl.stance, lang)} | {t(cl.verdict, lang)} | {cl.text} "
            f"| {', '.join(cl.provenance)} |"
            for cl in d.claims
        )
    if d.facts:
        md += ["", f"## {t('Facts', lang)}", ""]
        md.extend(
            f"- `{f.fact}` = {_show(f.value, lang)} "
            f"({t(f.source, lang)}{', ' + f.where if f.where else ''})"
            for f in d.facts
        )
    if d.warnings:
        md += ["", f"## {t('Warnings', lang)}", ""]
        md.extend(f"- {x}" for x in d.warnings)
    return "\n".join(md) + "\n"
