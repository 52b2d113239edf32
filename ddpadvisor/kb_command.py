"""``ddpadvisor kb validate|test|graph``: tooling for people who extend the knowledge base."""

from __future__ import annotations

import sys
from pathlib import Path

from ddpadvisor.cliutil import Parser
from ddpadvisor.kb.load import default_dirs, load_kb
from ddpadvisor.terminal import emit, shown


def _parser() -> Parser:
    p = Parser(prog="ddpadvisor kb", description="Validate, test and export the knowledge base.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    for name, text in (
        ("validate", "check schema and cross references; exit 2 on any problem"),
        ("test", "run rule tests; exit 1 on a failure"),
        ("graph", "export the causal graph"),
    ):
        s = sub.add_parser(name, help=text, description=text)
        s.add_argument(
            "--kb",
            dest="kb_dirs",
            action="append",
            type=Path,
            default=[],
            metavar="DIR",
            help="extra KB folder (merged over the bundled one)",
        )
        s.add_argument(
            "--only", action="store_true", help="use only the --kb folders, without the bundled KB"
        )
        if name == "validate":
            s.add_argument(
                "--seeds",
                type=Path,
                default=None,
                metavar="DIR",
                help="forum seed threads: check that claims cite every paragraph",
            )
        if name == "test":
            s.add_argument(
                "--lang",
                choices=("en", "zh"),
                default="en",
                help="also build each test's diagnosis in this language and report the text "
                "it would show untranslated (warnings)",
            )
        if name == "graph":
            s.add_argument("--format", choices=("dot", "graphml"), default="dot")
            s.add_argument("-o", "--output", type=Path, default=None, metavar="FILE")
            s.add_argument("--force", action="store_true", help="replace the -o file if it exists")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "graph" and args.output is not None:
        from ddpadvisor.outputs import check_output_file

        check_output_file(args.output, force=args.force)  # before any work, and again at write
    dirs = default_dirs(args.kb_dirs, bundled=not args.only)
    if args.cmd == "test":  # the cache serves rule tests as it serves diagnoses
        from ddpadvisor.engine.cache import load_cached

        kb, model = load_cached(dirs)
    else:
        kb, model = load_kb(dirs), None
    if args.cmd == "validate":
        return _validate(kb, args.seeds)
    if kb.problems:
        for p in kb.problems:
            print(f"ddpadvisor: error: {shown(p, one_line=True)}", file=sys.stderr)
        return 2
    if args.cmd == "test":
        return _test(kb, model, args.lang)
    return _graph(kb, args.format, args.output, args.force)


def _validate(kb, seeds: Path | None) -> int:  # type: ignore[no-untyped-def]
    problems = [str(p) for p in kb.problems]
    if seeds is not None and not kb.problems:
        from ddpadvisor.kb.check import check_seed_coverage

        if not seeds.is_dir():
            problems.append(f"{seeds}: seeds folder not found")
        else:
            missing = check_seed_coverage(kb, seeds)
            if missing:
                problems.append(f"{seeds}: paragraphs cited by no claim: {', '.join(missing)}")
    for p in problems:
        print(shown(p, one_line=True), file=sys.stderr)
    from ddpadvisor.kb.check import missing_translations

    warnings = missing_translations(kb, "zh")
    for w in warnings:
        print(shown(w, one_line=True), file=sys.stderr)
    counts = (
        f"{len(kb.facts)} facts, {len(kb.mechanisms)} mechanisms, {len(kb.causes)} causes, "
        f"{len(kb.fixes)} fixes, {len(kb.claims)} claims, {len(kb.tests)} rule tests"
    )
    if problems:
        print(f"kb validate: {len(problems)} problem(s) in {counts}", file=sys.stderr)
        return 2
    note = f"; {len(warnings)} warning(s): missing zh text" if warnings else ""
    print(f"kb validate: OK — {counts}{note}")
    return 0


def _test(kb, model, lang: str = "en") -> int:  # type: ignore[no-untyped-def]
    from ddpadvisor.engine.diagnose import Engine
    from ddpadvisor.ruletest import run_all

    engine = Engine(kb, model)
    outcomes = run_all(engine)
    if lang != "en":
        from ddpadvisor.ruletest import untranslated_in

        for line in untranslated_in(engine, lang):  # type: ignore[arg-type]
            print(shown(line))
    failed = todo = 0
    for o in outcomes:
        if o.passed:
            continue
        if o.test.todo:
            todo += 1
            print(shown(f"TODO {o.origin} {o.test.id}: {'; '.join(o.failures)} ({o.test.todo})"))
        else:
            failed += 1
            print(shown(f"FAIL {o.origin} {o.test.id}: {'; '.join(o.failures)}"))
    passed = len(outcomes) - failed - todo
    print(f"kb test: {passed} passed, {failed} failed, {todo} todo")
    return 1 if failed else 0


def _graph(kb, fmt: str, output: Path | None, force: bool = False) -> int:  # type: ignore[no-untyped-def]
    import networkx as nx

    from ddpadvisor.kb.graph import build_graph, to_dot

    g = build_graph(kb)
    if fmt == "dot":
        text = to_dot(g)
    else:
        clean = nx.DiGraph()
        for n, d in g.nodes(data=True):
            clean.add_node(
                n, **{k: (",".join(v) if isinstance(v, list) else v) for k, v in d.items()}
            )
        for a, b, d in g.edges(data=True):
            clean.add_edge(a, b, **d)
        text = "\n".join(nx.generate_graphml(clean)) + "\n"
    if output:
        from ddpadvisor.outputs import write_output

        write_output(output, text, force=force)
        shown_path = shown(str(output), one_line=True)
        print(f"wrote {shown_path} ({g.number_of_nodes()} nodes, {g.number_of_edges()} edges)")
    else:
        emit(text)
    return 0
