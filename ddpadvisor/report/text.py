"""Plain-text and Markdown renderings of a :class:`Diagnosis` (presentation only)."""

from __future__ import annotations

import textwrap

from ddpadvisor.report.models import CauseOut, Diagnosis


def _bar(score: float, width: int = 20) -> str:
    n = round(score * width)
    return "#" * n + "." * (width - n)


def _evidence_lines(cause: CauseOut, limit: int = 4) -> list[str]:
    out = []
    for ev in cause.evidence[:limit]:
        sign = "+" if ev.direction == "for" else "-"
        where = f" @ {ev.where}" if ev.where else ""
        via = f" via {ev.path[1].split(':', 1)[1]}" if len(ev.path) == 3 else ""
        detail = f" — {ev.detail}" if ev.detail else ""
        out.append(
            f"{sign}{abs(ev.size):.1f} {ev.fact}={_v(ev.value)} [{ev.source}{where}]{via}{detail}"
        )
    return out


def _v(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def render_text(d: Diagnosis, *, top: int = 5) -> str:
    w = textwrap.TextWrapper(width=96, subsequent_indent="      ")
    lines = [f"ddpadvisor {d.version} — {d.summary}", ""]
    lines.append("Ranked causes (score = posterior probability; evidence sizes are log10 LR):")
    for c in d.causes[:top]:
        lines.append(f"{c.rank:>2}. {_bar(c.score)} {c.score:6.1%}  {c.id}")
        lines.append(f"      {c.title}")
        for e in _evidence_lines(c):
            lines.extend(w.wrap(f"      {e}"))
    lead = next((c for c in d.causes if not c.catch_all), None)
    if lead is not None and lead.fixes and d.causes[0].id == lead.id:
        lines += ["", f"Why {lead.id}:"]
        lines.extend(w.wrap("      " + " ".join(lead.mechanism.split())))
        for fix in lead.fixes:
            lines += ["", f"Fix: {fix.title}"]
            lines.extend(f"  - {s}" for s in fix.steps)
            if fix.code:
                if fix.code.before:
                    lines.append("  before:")
                    lines.extend("    " + ln for ln in fix.code.before.rstrip().splitlines())
                lines.append("  after:")
                lines.extend("    " + ln for ln in fix.code.after.rstrip().splitlines())
            lines.append(f"  verify: {fix.verify.command}")
            lines.extend(w.wrap(f"  expect: {fix.verify.expect}"))
    if d.next_steps:
        lines += ["", "Most informative next steps:"]
        for st in d.next_steps[:5]:
            what = f"{st.fact}: {st.title}" if st.kind == "ask" else st.title
            lines.extend(w.wrap(f"  [{st.id}] {what} (gain {st.expected_gain:.2f} bits)"))
            if st.command:
                lines.append(f"      {st.command}")
    if d.claims:
        lines += ["", "Forum advice, judged on this evidence:"]
        for cl in d.claims[:12]:
            lines.extend(
                w.wrap(
                    f"  {cl.stance.upper():9} [{cl.verdict}] {cl.text} ({', '.join(cl.provenance)})"
                )
            )
    if d.facts:
        lines += ["", "Facts used:"]
        for f in d.facts:
            where = f" @ {f.where}" if f.where else ""
            lines.append(f"  {f.fact} = {_v(f.value)} [{f.source}{where}]")
    if d.warnings:
        lines += ["", "Warnings:"]
        lines.extend(f"  ! {x}" for x in d.warnings)
    return "\n".join(lines) + "\n"


def render_markdown(d: Diagnosis, *, top: int = 5) -> str:
    md = [
        "# ddpadvisor diagnosis",
        "",
        f"_{d.summary}_",
        "",
        "## Ranked causes",
        "",
        "| # | cause | score | strongest evidence |",
        "|---|---|---|---|",
    ]
    for c in d.causes[:top]:
        ev = "; ".join(_evidence_lines(c, 2)).replace("|", "\\|") or "—"
        md.append(f"| {c.rank} | `{c.id}` {c.title} | {c.score:.1%} | {ev} |")
    for c in d.causes[:top]:
        if c.catch_all or not c.fixes:
            continue
        md += ["", f"## {c.id}", "", " ".join(c.mechanism.split()), ""]
        for fix in c.fixes:
            md.append(f"### Fix: {fix.title}")
            md.extend(f"- {s}" for s in fix.steps)
            if fix.code:
                if fix.code.before:
                    md += ["", "Before:", "```python", fix.code.before.rstrip(), "```"]
                md += ["", "After:", "```python", fix.code.after.rstrip(), "```"]
            md += ["", f"Verify: `{fix.verify.command}` — {fix.verify.expect}", ""]
        if c.references:
            md.append("References: " + ", ".join(c.references))
    if d.next_steps:
        md += ["", "## Next steps", ""]
        md.extend(
            f"- **{st.id}**: {st.title} — gain {st.expected_gain:.2f} bits"
            + (f" — `{st.command}`" if st.command else "")
            for st in d.next_steps
        )
    if d.claims:
        md += [
            "",
            "## Forum advice",
            "",
            "| stance | verdict | advice | source |",
            "|---|---|---|---|",
        ]
        md.extend(
            f"| {cl.stance} | {cl.verdict} | {cl.text} | {', '.join(cl.provenance)} |"
            for cl in d.claims
        )
    if d.facts:
        md += ["", "## Facts", ""]
        md.extend(
            f"- `{f.fact}` = {_v(f.value)} ({f.source}{', ' + f.where if f.where else ''})"
            for f in d.facts
        )
    if d.warnings:
        md += ["", "## Warnings", ""]
        md.extend(f"- {x}" for x in d.warnings)
    return "\n".join(md) + "\n"
