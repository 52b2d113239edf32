"""Command line: parse arguments and dispatch. No diagnosis logic lives here.

``ddpadvisor``                 the TUI
``ddpadvisor --json [src…]``   one JSON diagnosis on stdout
``ddpadvisor report [src…]``   the same diagnosis as plain text
``ddpadvisor trace|probe|kb|schema|claims …``
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor import __version__
from ddpadvisor.cliutil import Parser
from ddpadvisor.errors import InputError, RunFailed

if TYPE_CHECKING:
    from ddpadvisor.evidence.gather import Sources
    from ddpadvisor.report.models import Diagnosis

SUBCOMMANDS = ("trace", "probe", "kb", "schema", "report", "claims", "ask")


def _add_sources(p: Parser) -> None:
    g = p.add_argument_group("evidence (combine freely)")
    g.add_argument(
        "--answers",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="YAML/JSON mapping of fact id to value",
    )
    g.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="FACT=VALUE",
        help="one answer; repeatable; 'unknown' leaves the fact unobserved",
    )
    g.add_argument(
        "--script",
        dest="scripts",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="training script to scan statically (never executed)",
    )
    g.add_argument(
        "--trace",
        dest="traces",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="output folder of 'ddpadvisor trace'",
    )
    g.add_argument(
        "--probe-results",
        dest="probe_results",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="output folder of 'ddpadvisor probe'",
    )
    g.add_argument(
        "--describe",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="your own description or forum post (English or Chinese), read for facts",
    )
    g.add_argument(
        "--kb",
        dest="kb_dirs",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="extra KB folder merged over the bundled one; repeatable",
    )
    g.add_argument(
        "--gpu",
        choices=("yes", "no", "unknown"),
        default="unknown",
        help="whether GPU probes can run where you are (affects next questions)",
    )
    add_lang(p)


def add_lang(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lang",
        choices=("en", "zh"),
        default=None,
        help="language of the text (default: from LC_ALL / LC_MESSAGES / LANG, else en)",
    )


def _diagnose_parser() -> Parser:
    p = Parser(
        prog="ddpadvisor",
        description="Rank the causes of DDP loss oscillation/divergence from evidence. Without "
        "--json, opens the interactive TUI. Subcommands: " + ", ".join(SUBCOMMANDS) + ".",
    )
    p.add_argument("--version", action="version", version=f"ddpadvisor {__version__}")
    p.add_argument("--json", action="store_true", help="print one JSON diagnosis on stdout")
    p.add_argument(
        "--top", type=int, default=None, metavar="N", help="list only the N most likely causes"
    )
    _add_sources(p)
    return p


def _report_parser() -> Parser:
    p = Parser(prog="ddpadvisor report", description="Print the diagnosis as a plain-text report.")
    p.add_argument("--markdown", action="store_true", help="Markdown instead of plain text")
    p.add_argument("--top", type=int, default=5, metavar="N")
    p.add_argument(
        "--from-json",
        type=Path,
        default=None,
        metavar="FILE",
        help="render a saved --json document instead of diagnosing",
    )
    _add_sources(p)
    return p


def _schema_parser() -> Parser:
    p = Parser(
        prog="ddpadvisor schema", description="Print a JSON Schema generated from the models."
    )
    p.add_argument("which", nargs="?", choices=("output", "kb"), default="output")
    return p


def _claims_parser() -> Parser:
    p = Parser(
        prog="ddpadvisor claims",
        description="Check a piece of forum advice against the knowledge base.",
    )
    p.add_argument("text", nargs="*", help="advice to look up (words); empty lists all claims")
    p.add_argument("--verdict", choices=("correct", "partly-correct", "myth", "harmful"))
    p.add_argument("--kb", dest="kb_dirs", action="append", type=Path, default=[], metavar="DIR")
    p.add_argument("--lang", choices=("en", "zh"), help="default: LC_ALL/LC_MESSAGES/LANG, else en")
    p.add_argument("--json", action="store_true")
    return p


def _ask_parser() -> Parser:
    p = Parser(
        prog="ddpadvisor ask",
        description="Read your own description of the problem (English or Chinese) for facts, "
        "show each with the phrase it came from, then diagnose.",
    )
    p.add_argument("text", nargs="*", help="the description (or use --describe FILE)")
    p.add_argument("--json", action="store_true", help="print one JSON diagnosis on stdout")
    p.add_argument("--top", type=int, default=5, metavar="N")
    _add_sources(p)
    return p


def _sources(args: argparse.Namespace) -> Sources:
    from ddpadvisor.evidence.gather import Sources

    return Sources(
        answers=args.answers,
        sets=args.sets,
        scripts=args.scripts,
        traces=args.traces,
        probe_results=args.probe_results,
        describe=list(getattr(args, "describe", [])),
    )


def cmd_ask(argv: list[str]) -> int:
    from ddpadvisor.evidence.intake import described, extract, read_text, to_observations
    from ddpadvisor.i18n import detect, t
    from ddpadvisor.report.models import IntakeOut
    from ddpadvisor.report.text import render_text
    from ddpadvisor.service import gather_sources, load_engine

    args = _ask_parser().parse_args(argv)
    text = " ".join(args.text)
    if not text.strip() and not args.describe:
        raise InputError('ask needs a description: ddpadvisor ask "TEXT" or --describe FILE')
    engine = load_engine(args.kb_dirs)
    texts = [text, *(read_text(path) for path in args.describe)]
    found = [f for piece in texts if piece.strip() for f in extract(engine.kb, piece)]
    args.describe = []
    got = gather_sources(engine, _sources(args))
    gpu = {"yes": True, "no": False}.get(args.gpu)
    lang = detect(args.lang)
    diagnosis = engine.diagnose(
        [*to_observations(found, "description"), *got.observations],
        warnings=got.warnings,
        gpu_available=gpu,
        declined=got.declined,
        verified=got.verified,
        resemblance=described(engine.kb, texts),
        lang=lang,
        run_failed=got.failed,
    )
    diagnosis.intake = [
        IntakeOut(fact=f.fact, value=f.value, phrase=f.phrase, origin=f.origin) for f in found
    ]
    if args.json:
        sys.stdout.write(diagnosis.model_dump_json(indent=2) + "\n")
        return 3 if got.failed else 0
    lines = [t("From your description:", lang)]
    if not found:
        lines.append(
            "  " + t("(nothing recognised; answer the questions below, or run ddpadvisor)", lang)
        )
    for f in found:
        value = str(f.value).lower() if isinstance(f.value, bool) else str(f.value)
        said = t("code", lang) + " " if f.origin == "code" else ""
        lines.append(f"  {f.fact} = {value}    \u2190 {said}\u201c{f.phrase}\u201d")
    lines.append(t("Correct any of these with --set FACT=VALUE (or FACT=unknown).", lang))
    if diagnosis.resemblance:
        lines.append(t("Your description reads like:", lang))
        for r in diagnosis.resemblance[:3]:
            lines.append(f"  {r.cause}  {r.score:.2f}    \u2190 {', '.join(r.words)}")
    sys.stdout.write("\n".join(lines) + "\n\n" + render_text(diagnosis, top=args.top))
    return 3 if got.failed else 0


def run_diagnosis(args: argparse.Namespace) -> tuple[Diagnosis, bool]:
    from ddpadvisor.i18n import detect
    from ddpadvisor.service import diagnose, load_engine

    engine = load_engine(args.kb_dirs)
    gpu = {"yes": True, "no": False}.get(args.gpu)
    lang = detect(args.lang)
    return diagnose(engine, _sources(args), gpu_available=gpu, top=args.top, lang=lang)


def cmd_json(args: argparse.Namespace) -> int:
    diagnosis, failed = run_diagnosis(args)
    sys.stdout.write(diagnosis.model_dump_json(indent=2) + "\n")
    return 3 if failed else 0


def cmd_report(argv: list[str]) -> int:
    from ddpadvisor.report.text import render_markdown, render_text

    args = _report_parser().parse_args(argv)
    if args.from_json:
        from pydantic import ValidationError

        from ddpadvisor.report.models import Diagnosis
        from ddpadvisor.yamlio import load_json

        data = load_json(args.from_json)
        try:
            diagnosis = Diagnosis.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise InputError(
                f"not a ddpadvisor diagnosis: {loc}: {err['msg']}", args.from_json
            ) from None
        failed = False
    else:
        args.gpu = getattr(args, "gpu", "unknown")
        diagnosis, failed = run_diagnosis(args)
    render = render_markdown if args.markdown else render_text
    sys.stdout.write(render(diagnosis, top=args.top))
    return 3 if failed else 0


def cmd_schema(argv: list[str]) -> int:
    import json

    args = _schema_parser().parse_args(argv)
    if args.which == "kb":
        from ddpadvisor.kb.schema import KBFile

        schema = KBFile.model_json_schema(by_alias=True)
    else:
        from ddpadvisor.report.models import Diagnosis

        schema = Diagnosis.model_json_schema()
    sys.stdout.write(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    return 0


def cmd_claims(argv: list[str]) -> int:
    from ddpadvisor.i18n import detect
    from ddpadvisor.kb.claims import index_for, lookup, render_claims
    from ddpadvisor.service import load_engine

    args = _claims_parser().parse_args(argv)
    engine = load_engine(args.kb_dirs)
    query = " ".join(args.text)
    found = lookup(engine.kb, query, verdict=args.verdict)
    best = next(iter(index_for(engine.kb).search(query)), None) if not found else None
    out = render_claims(
        found,
        as_json=args.json,
        query=query,
        lang=detect(args.lang),
        best=best.score if best else 0.0,
    )
    sys.stdout.write(out)
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    try:
        from ddpadvisor.tui.app import run_tui
    except ImportError as exc:
        raise InputError(f"the TUI needs textual ({exc}); use --json or 'report'") from None
    return run_tui(args)


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in SUBCOMMANDS:
        name, rest = argv[0], argv[1:]
        handlers: dict[str, Callable[[list[str]], int]] = {
            "report": cmd_report,
            "schema": cmd_schema,
            "claims": cmd_claims,
            "ask": cmd_ask,
        }
        if name in handlers:
            return handlers[name](rest)
        if name == "kb":
            from ddpadvisor.kb_command import main as kb_main

            return kb_main(rest)
        if name == "probe":
            from ddpadvisor.probing.cli import main as probe_main

            return probe_main(rest)
        from ddpadvisor.tracing.cli import main as trace_main

        return trace_main(rest)
    args = _diagnose_parser().parse_args(argv)
    if args.json:
        return cmd_json(args)
    return cmd_tui(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Scanning every installed distribution for pydantic plugins costs more start-up time than
    # a whole diagnosis; the CLI uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        return _dispatch(argv)
    except InputError as exc:
        print(f"ddpadvisor: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except RunFailed as exc:
        print(f"ddpadvisor: run failed: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ddpadvisor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # never a traceback for the user; DDPADVISOR_DEBUG=1 shows it
        if os.environ.get("DDPADVISOR_DEBUG"):
            raise
        print(
            f"ddpadvisor: internal error: {type(exc).__name__}: {exc} "
            "(set DDPADVISOR_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 1
