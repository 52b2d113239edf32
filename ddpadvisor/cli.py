"""Command line: parse arguments and dispatch. No diagnosis logic lives here.

``ddpadvisor``                 the TUI
``ddpadvisor --json [src…]``   one JSON diagnosis on stdout
``ddpadvisor report [src…]``   the same diagnosis as plain text
``ddpadvisor trace|probe|kb|schema|claims …``
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor import __version__
from ddpadvisor.cliutil import Parser, positive_int
from ddpadvisor.errors import InputError, RunFailed
from ddpadvisor.observation import NEEDS

if TYPE_CHECKING:
    from ddpadvisor.evidence.gather import Sources
    from ddpadvisor.report.models import Diagnosis

SUBCOMMANDS = ("trace", "probe", "kb", "schema", "report", "claims", "ask")


def _add_sources(p: Parser) -> None:
    from ddpadvisor.evidence.sources import ORDER

    g = p.add_argument_group("evidence (combine freely)")
    for source in ORDER:  # the registry's flags, in its order
        for flag in source.flags:
            g.add_argument(
                flag.name,
                dest=source.field,
                action="append",
                type=Path if flag.path else str,
                default=[],
                metavar=flag.metavar,
                help=flag.help,
            )
    g.add_argument(
        "--without",
        action="append",
        choices=NEEDS,
        default=[],
        metavar="NEED",
        help="what you do not have here: 'script' (no training script at hand) or 'machine' "
        "(cannot run jobs there); every step that needs it is declined; repeatable",
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
        "--top",
        type=positive_int,
        default=None,
        metavar="N",
        help="list only the N most likely causes",
    )
    _add_sources(p)
    return p


def _report_parser() -> Parser:
    p = Parser(prog="ddpadvisor report", description="Print the diagnosis as a plain-text report.")
    p.add_argument("--markdown", action="store_true", help="Markdown instead of plain text")
    p.add_argument("--top", type=positive_int, default=5, metavar="N")
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
    p.add_argument("--top", type=positive_int, default=5, metavar="N")
    _add_sources(p)
    return p


def _sources(args: argparse.Namespace) -> Sources:
    from ddpadvisor.evidence.gather import Sources
    from ddpadvisor.evidence.sources import ORDER

    fields = {s.field: list(getattr(args, s.field, [])) for s in ORDER}
    # --without NEED declines every step that needs it, as an answer does (without:NEED)
    fields["sets"] = [*fields.get("sets", []), *(f"without:{n}=unknown" for n in args.without)]
    return Sources(**fields)


def cmd_ask(argv: list[str]) -> int:
    from ddpadvisor.evidence.intake import described, extract, to_observations
    from ddpadvisor.i18n import detect, t
    from ddpadvisor.report.models import IntakeOut
    from ddpadvisor.report.present import diagnose
    from ddpadvisor.report.text import render_text
    from ddpadvisor.service import gather_sources, load_engine
    from ddpadvisor.terminal import emit, emit_json
    from ddpadvisor.yamlio import read_description_text

    args = _ask_parser().parse_args(argv)
    text = " ".join(args.text)
    if not text.strip() and not args.describe:
        raise InputError('ask needs a description: ddpadvisor ask "TEXT" or --describe FILE')
    engine = load_engine(args.kb_dirs)
    texts = [text, *(read_description_text(path) for path in args.describe)]
    found = [f for piece in texts if piece.strip() for f in extract(engine.kb, piece)]
    args.describe = []
    got = gather_sources(engine, _sources(args))
    gpu = {"yes": True, "no": False}.get(args.gpu)
    lang = detect(args.lang)
    diagnosis = diagnose(
        engine,
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
        emit_json(diagnosis)
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
    emit("\n".join(lines) + "\n\n" + render_text(diagnosis, top=args.top))
    return 3 if got.failed else 0


def run_diagnosis(args: argparse.Namespace) -> tuple[Diagnosis, bool]:
    from ddpadvisor.i18n import detect
    from ddpadvisor.service import diagnose, load_engine

    engine = load_engine(args.kb_dirs)
    gpu = {"yes": True, "no": False}.get(args.gpu)
    lang = detect(args.lang)
    return diagnose(engine, _sources(args), gpu_available=gpu, top=args.top, lang=lang)


def cmd_json(args: argparse.Namespace) -> int:
    from ddpadvisor.terminal import emit_json

    diagnosis, failed = run_diagnosis(args)
    emit_json(diagnosis)
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
    from ddpadvisor.terminal import emit

    render = render_markdown if args.markdown else render_text
    emit(render(diagnosis, top=args.top))
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
    if args.json:
        sys.stdout.write(out)  # exact: json.dumps escapes control characters itself
    else:
        from ddpadvisor.terminal import emit

        emit(out)
    return 0


def terminal_problem() -> str | None:
    """Why the TUI cannot draw here, or None: it needs a terminal on stdin and stdout."""
    if os.environ.get("TERM") == "dumb":
        return "TERM=dumb"
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return "stdin or stdout is not a terminal"
    return None


def cmd_tui(args: argparse.Namespace) -> int:
    why = terminal_problem()
    if why:
        raise InputError(
            f"the interactive TUI needs a terminal ({why}); for output to a pipe or a file use "
            "'ddpadvisor --json ...' or 'ddpadvisor report ...'"
        )
    from ddpadvisor.yamlio import read_description_text

    for path in args.describe:  # refused here, before the TUI's reader could block on a FIFO
        read_description_text(path)
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
    from ddpadvisor.terminal import guard_streams, shown

    if sys.stderr is None:  # started with stderr closed: errors go nowhere, not to stdout
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    if sys.stdout is None:  # started with stdout closed (``>&-``): nowhere to answer
        print("ddpadvisor: error: stdout is closed; nothing can be written", file=sys.stderr)
        return 2
    guard_streams()
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
        return code
    except InputError as exc:
        print(f"ddpadvisor: error: {shown(exc.one_line(), one_line=True)}", file=sys.stderr)
        return exc.exit_code
    except RunFailed as exc:
        print(f"ddpadvisor: run failed: {shown(exc, one_line=True)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ddpadvisor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (``| head``): nothing more to say
        _drop_stdout()
        return 0
    except OSError as exc:  # a full disk, a name too long, a folder not readable: exit 2
        _drop_stdout()
        print(f"ddpadvisor: error: {shown(_os_error_line(exc), one_line=True)}", file=sys.stderr)
        return 2
    except Exception as exc:  # never a traceback for the user; DDPADVISOR_DEBUG=1 shows it
        if os.environ.get("DDPADVISOR_DEBUG"):
            raise
        print(
            f"ddpadvisor: internal error: {type(exc).__name__}: {shown(exc, one_line=True)} "
            "(set DDPADVISOR_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 1


def _os_error_line(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    name = exc.filename
    if name is None:
        writing = exc.errno in (errno.ENOSPC, errno.EIO, errno.EPIPE, errno.EDQUOT, errno.EFBIG)
        return f"cannot write the output: {what}" if writing else what
    text = os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name)
    if len(text) > 120:
        text = text[:60] + "..." + text[-40:]
    return f"{text}: {what}"


def _drop_stdout() -> None:
    """Point stdout at /dev/null so that the flush at exit cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
