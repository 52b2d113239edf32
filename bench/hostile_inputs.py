"""Hostile inputs against the CLI, by class (issue 30): prints how many cases of each class fail.

A case fails when ddpadvisor exits 1 ("internal error"), runs past its timeout, writes a raw
control or bidi character to the terminal streams, replaces a file the user had, accepts an
out-of-range value, or a damaged cache changes the answer or leaves more than one line on stderr.

    python bench/hostile_inputs.py            # counts per class
    python bench/hostile_inputs.py -v         # and each failing case
    python bench/hostile_inputs.py -v cache   # only the named classes
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "trace_fixtures" / "control_mlp"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ESC = "\x1b[2J\x1b]0;pwned\x07"


@dataclass
class Got:
    rc: int | None  # None: timed out
    out: str
    err: str
    seconds: float


@dataclass
class Case:
    cls: str
    name: str
    argv: list[str | bytes]
    check: Callable[[Got], str | None] = lambda g: None
    env: dict[str, str] = field(default_factory=dict)
    stdout: str = "pipe"  # pipe | full | closed (the reader left) | none (fd 1 not open)
    timeout: float = 20.0


def run(case: Case, cache: Path) -> Got:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(ROOT), **case.env}
    env.pop("DDPADVISOR_DEBUG", None)
    cmd = [sys.executable, "-m", "ddpadvisor", *case.argv]
    t0 = time.monotonic()
    if case.stdout == "full":
        with open("/dev/full", "wb") as full:
            p = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=full, stderr=subprocess.PIPE, env=env
            )
            try:
                _, err = p.communicate(timeout=case.timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                return Got(None, "", "", case.timeout)
        return Got(p.returncode, "", err.decode("utf-8", "replace"), time.monotonic() - t0)
    if case.stdout == "none":
        p = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=lambda: os.close(1),
        )
        try:
            _, err = p.communicate(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return Got(None, "", "", case.timeout)
        return Got(p.returncode, "", err.decode("utf-8", "replace"), time.monotonic() - t0)
    if case.stdout == "closed":
        r, w = os.pipe()
        p = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=w, stderr=subprocess.PIPE, env=env
        )
        os.close(w)
        os.close(r)
        out = b""
        try:
            _, err = p.communicate(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return Got(None, "", "", case.timeout)
    else:
        p = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        try:
            out, err = p.communicate(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return Got(None, "", "", case.timeout)
    return Got(
        p.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        time.monotonic() - t0,
    )


def verdict(case: Case, got: Got) -> str | None:
    """Why the case failed, or None."""
    if got.rc is None:
        return f"hung past {case.timeout:.0f} s"
    if got.rc == 1 and "internal error" in got.err:
        return "exit 1: " + got.err.strip().splitlines()[-1][:160]
    if "Traceback" in got.err or "Exception ignored" in got.err:
        return "traceback: " + got.err.strip().splitlines()[-1][:160]
    if RAW.search(got.err) or RAW.search(got.out.replace("\t", "")):
        where = "stderr" if RAW.search(got.err) else "stdout"
        return f"raw control character on {where}"
    return case.check(got)


def refused(got: Got) -> str | None:
    """Exit 2 with one line on stderr."""
    lines = got.err.strip().splitlines()
    if got.rc != 2:
        return f"exit {got.rc}, expected 2 ({(lines or [''])[-1][:120]})"
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr"
    return None


def ok(got: Got) -> str | None:
    return None if got.rc == 0 else f"exit {got.rc}: {got.err.strip()[:160]}"


def ok_or_refused(got: Got) -> str | None:
    return ok(got) if got.rc == 0 else refused(got)


def quiet_end(got: Got) -> str | None:
    """A closed pipe or full device: no traceback, no exit 1 (checked above), at most one line."""
    lines = got.err.strip().splitlines()
    if len(lines) > 1:
        return f"{len(lines)} lines on stderr"
    return None


def build(tmp: Path) -> list[Case]:
    cases: list[Case] = []

    def add(cls: str, name: str, argv: list[str | bytes], check=refused, **kw) -> None:  # type: ignore[no-untyped-def]
        cases.append(Case(cls, name, argv, check, **kw))

    def write(name: str, text: str) -> Path:
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8", errors="surrogatepass")
        return p

    # 1. outputs that never destroy
    mine = write("mine.dot", "my own notes\n")

    def kept(got: Got) -> str | None:
        if mine.read_text() != "my own notes\n":
            return "the user's file was replaced"
        return refused(got)

    add("overwrite", "kb graph -o existing", ["kb", "graph", "-o", str(mine)], kept)
    forced = write("forced.dot", "old\n")
    add(
        "overwrite",
        "kb graph -o existing --force",
        ["kb", "graph", "-o", str(forced), "--force"],
        lambda g: ok(g) or (None if forced.read_text().startswith("digraph") else "not written"),
    )
    add("overwrite", "kb graph -o folder", ["kb", "graph", "-o", str(tmp)])
    add("overwrite", "kb graph -o missing folder", ["kb", "graph", "-o", str(tmp / "no/x.dot")])
    add("overwrite", "kb graph -o /proc/version", ["kb", "graph", "-o", "/proc/version"])
    fifo_out = tmp / "out.fifo"
    os.mkfifo(fifo_out)
    add("overwrite", "kb graph -o FIFO", ["kb", "graph", "-o", str(fifo_out)], timeout=15)

    # 2. terminal safety
    add("escapes", "report --set gpu_model=ESC", ["report", "--set", f"gpu_model={ESC}"], ok)
    add("escapes", "report --set bidi", ["report", "--set", "gpu_model=A\u202eB\u2066C"], ok)
    add("escapes", "--set unknown fact ESC", ["--json", "--set", f"no{ESC}=1"])
    add("escapes", "--set bad value ESC", ["report", "--set", f"world_size={ESC}"])
    ans = write("esc.yaml", f'gpu_model: "{ESC}"\nframework: "x{ESC}"\n')
    add("escapes", "report --answers ESC", ["report", "--answers", str(ans)], ok_or_refused)
    add("escapes", "--describe missing ESC path", ["--json", "--describe", str(tmp / ESC)])
    add("escapes", "claims ESC query", ["claims", ESC, "seed"], ok)
    add("escapes", "ask ESC text", ["ask", f"loss oscillates {ESC} 8 GPUs"], ok)
    desc = write("esc.txt", f"We never call set_epoch {ESC}\n    sampler.set_epoch{ESC}(0)\n")
    add("escapes", "ask --describe ESC file", ["ask", "--describe", str(desc)], ok)
    esc_trace = tmp / "esc_trace"
    shutil.copytree(TRACE, esc_trace)
    meta = json.loads((esc_trace / "meta.json").read_text())
    meta["failure"] = f"rank 1 {ESC}"
    meta["warnings"] = [f"warn {ESC}\u202e"]
    meta["command"][-1] = ESC
    (esc_trace / "meta.json").write_text(json.dumps(meta))
    lines = (esc_trace / "rank0.jsonl").read_text().splitlines()
    start = json.loads(lines[0])
    start["argv"] = [f"train{ESC}.py"]
    start["host"] = ESC
    lines[0] = json.dumps(start)
    (esc_trace / "rank0.jsonl").write_text("\n".join(lines) + "\n")
    add("escapes", "report --trace ESC meta", ["report", "--trace", str(esc_trace)], ok_or_refused)
    diag = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "--json", "--set", "world_size=8"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    ).stdout
    doc = json.loads(diag)
    doc["warnings"] = [f"w{ESC}"]
    if doc["causes"]:
        doc["causes"][0]["title"] = f"T{ESC}"
    saved = write("diag.json", json.dumps(doc))
    add("escapes", "report --from-json ESC", ["report", "--from-json", str(saved)], ok)
    rules = tmp / "esc_rules"
    write(
        "esc_rules/r.yaml",
        f'causes:\n  - id: bad-one\n    title: "T{ESC}"\n    area: data\n    prior: common\n'
        f'    mechanism: "m{ESC}"\n    evidence:\n      - {{fact: world_size, ge: 3, '
        "strength: strong}\n    references: []\n",
    )
    add(
        "escapes",
        "report --kb ESC rule",
        ["report", "--kb", str(rules), "--set", "world_size=8"],
        ok_or_refused,
    )

    # 4. special files
    fifo = tmp / "in.fifo"
    os.mkfifo(fifo)
    sock_path = tmp / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    cases_special = {
        "--describe FIFO": ["--json", "--describe", str(fifo)],
        "--script FIFO": ["--json", "--script", str(fifo)],
        "--answers FIFO": ["--json", "--answers", str(fifo)],
        "ask --describe FIFO": ["ask", "--describe", str(fifo)],
        "--describe /dev/zero": ["--json", "--describe", "/dev/zero"],
        "--describe /dev/urandom": ["--json", "--describe", "/dev/urandom"],
        "--describe socket": ["--json", "--describe", str(sock_path)],
        "--describe /proc/self/status": ["--json", "--describe", "/proc/self/status"],
        "--describe /proc/kmsg": ["--json", "--describe", "/proc/kmsg"],
        "--script /dev/zero": ["--json", "--script", "/dev/zero"],
        "--answers /proc/self/environ": ["--json", "--answers", "/proc/self/environ"],
        "report --from-json FIFO": ["report", "--from-json", str(fifo)],
    }
    for name, argv in cases_special.items():
        add("special", name, list(argv), timeout=15)
    fifo_kb = tmp / "fifo_kb"
    fifo_kb.mkdir()
    os.mkfifo(fifo_kb / "rules.yaml")
    add("special", "--kb folder with FIFO rule", ["--json", "--kb", str(fifo_kb)], timeout=15)
    laughs = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    add("special", "billion laughs answers", ["--json", "--answers", str(write("l.yaml", laughs))])
    lk = write("laughs_kb/r.yaml", laughs)
    sections = write("laughs_sections/r.yaml", laughs + "tests: *i\n")
    add(
        "special",
        "billion laughs as rule tests",
        ["kb", "validate", "--kb", str(sections.parent)],
        lambda g: None if g.rc == 2 else f"exit {g.rc}",
    )
    add("special", "billion laughs rule", ["--json", "--kb", str(lk.parent)])
    big = tmp / "big.txt"
    with open(big, "wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    add("special", "--describe 64 MiB", ["--json", "--describe", str(big)], timeout=20)
    add("special", "--script /proc/kmsg", ["--json", "--script", "/proc/kmsg"], timeout=15)
    add("special", "--kb /usr (a huge tree)", ["--json", "--kb", "/usr"], timeout=20)
    add("special", "--kb /proc", ["--json", "--kb", "/proc"], timeout=20)
    seeds = tmp / "seeds"
    seeds.mkdir()
    os.mkfifo(seeds / "000.txt")
    add(
        "special",
        "kb validate --seeds FIFO",
        ["kb", "validate", "--seeds", str(seeds)],
        lambda g: None if g.rc == 2 else f"exit {g.rc}",
        timeout=15,
    )
    add("special", "TUI without a terminal", [], env={"TERM": "dumb"}, timeout=15)
    add("special", "TUI stdin/stdout pipes", [], env={"TERM": "xterm"}, timeout=15)

    # 4b. TensorBoard event files attached: damage from the first byte, special files, a
    # folder of many empty files (exit 2, one line); damage later keeps the events before it
    events = next((ROOT / "tests/attach_fixtures/tensorboard/nan").glob("*tfevents*")).read_bytes()
    tbdir = tmp / "tb"
    tbdir.mkdir()

    def event_bytes(name: str, blob: bytes) -> Path:
        path = tbdir / f"events.out.tfevents.{name}"
        path.write_bytes(blob)
        return path

    sys.path.insert(0, str(ROOT))
    from ddpadvisor.evidence.files.tensorboard import masked_crc

    huge = struct.pack("<Q", (1 << 63) - 1)
    for name, blob in {
        "truncated in its first record": events[:20],
        "bad length CRC": events[:8] + bytes([events[8] ^ 0xFF]) + events[9:],
        "bad data CRC in its first record": events[:14] + bytes([events[14] ^ 1]) + events[15:],
        "huge length field, valid CRC": huge + struct.pack("<I", masked_crc(huge)) + events[12:],
        "empty": b"",
        "random bytes": os.urandom(4096),
    }.items():
        path = event_bytes(name.replace(" ", "_").replace(",", ""), blob)
        add("tensorboard", f"--attach event file: {name}", ["--json", "--attach", str(path)])
    cut = event_bytes("cut_mid_way", events[:-30])
    add(
        "tensorboard",
        "--attach event file cut mid-way",
        ["--json", "--attach", str(cut)],
        lambda g: ok(g) or (None if "truncated record at byte" in g.out else "no warning"),
    )
    tb_fifo = tbdir / "events.out.tfevents.fifo"
    os.mkfifo(tb_fifo)
    add("tensorboard", "--attach event FIFO", ["--json", "--attach", str(tb_fifo)], timeout=15)
    many = tmp / "tb_many"
    many.mkdir()
    for i in range(10_000):
        (many / f"events.out.tfevents.{i}.host").touch()
    add(
        "tensorboard", "--attach folder of 10k empty event files", ["--json", "--attach", str(many)]
    )
    loop = tmp / "tb_loop"
    loop.mkdir()
    (loop / "self").symlink_to(loop)
    add("tensorboard", "--attach folder with a symlink loop", ["--json", "--attach", str(loop)])

    # 5. OS and encoding errors
    long = "a" * 300
    for name, argv in {
        "--answers ENAMETOOLONG": ["--json", "--answers", long],
        "--script ENAMETOOLONG": ["--json", "--script", long],
        "--kb ENAMETOOLONG": ["--json", "--kb", long],
        "--describe ENAMETOOLONG": ["--json", "--describe", long],
        "--trace ENAMETOOLONG": ["--json", "--trace", long],
        "--probe-results ENAMETOOLONG": ["--json", "--probe-results", long],
        "report --from-json ENAMETOOLONG": ["report", "--from-json", long],
        "kb graph -o ENAMETOOLONG": ["kb", "graph", "-o", long],
    }.items():
        add("oserror", name, list(argv))
    outs = {
        "--json": ["--json", "--set", "world_size=8"],
        "report": ["report", "--set", "world_size=8"],
        "claims": ["claims", "seed"],
        "schema": ["schema"],
        "kb graph": ["kb", "graph"],
        "ask": ["ask", "loss oscillates on 8 GPUs"],
    }
    for name, argv in outs.items():
        add("oserror", f"{name} >/dev/full", list(argv), refused, stdout="full")
        add("oserror", f"{name} | closed pipe", list(argv), quiet_end, stdout="closed")
        add("oserror", f"{name} >&-", list(argv), refused, stdout="none")
    for enc_name, env in {
        "ascii": {"PYTHONIOENCODING": "ascii"},
        "latin-1": {"PYTHONIOENCODING": "latin-1"},
        "POSIX": {"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
    }.items():
        for name, argv in {
            "--json zh": ["--json", "--lang", "zh", "--set", "world_size=8"],
            "report zh": ["report", "--lang", "zh", "--set", "world_size=8"],
            "claims zh": ["claims", "--lang", "zh", "seed"],
            "ask zh": ["ask", "--lang", "zh", "四张卡 loss 震荡"],
        }.items():
            add("encoding", f"{name} {enc_name}", list(argv), ok, env=env)
    add(
        "encoding", "surrogate in --set", ["report", b"--set", b"gpu_model=\xff\xfe"], ok_or_refused
    )
    sur = write("sur.json", '{"gpu_model": "\\ud800x"}')
    add("encoding", "lone surrogate JSON answers", ["report", "--answers", str(sur)], ok_or_refused)
    add("encoding", "lone surrogate JSON --json", ["--json", "--answers", str(sur)], ok_or_refused)
    digits = "9" * 400
    add("encoding", "400-digit --set", ["--json", "--set", f"world_size={digits}"])
    add(
        "encoding",
        "400-digit JSON",
        ["--json", "--answers", str(write("d.json", f'{{"world_size": {digits}}}'))],
    )
    add(
        "encoding",
        "400-digit YAML",
        ["--json", "--answers", str(write("d.yaml", f"world_size: {digits}\n"))],
    )
    add(
        "encoding",
        "5000-digit YAML",
        ["--json", "--answers", str(write("e.yaml", f"world_size: {'9' * 5000}\n"))],
    )
    big_trace = tmp / "int_trace"
    shutil.copytree(TRACE, big_trace)
    tl = (big_trace / "rank0.jsonl").read_text().splitlines()
    st = json.loads(tl[0])
    st["world"] = 10**400
    tl[0] = json.dumps(st)
    step = next(i for i, ln in enumerate(tl) if '"k":"step"' in ln or '"k": "step"' in ln)
    rec = json.loads(tl[step])
    rec["s"] = 10**400
    tl[step] = json.dumps(rec)
    (big_trace / "rank0.jsonl").write_text("\n".join(tl) + "\n")
    add("encoding", "400-digit in trace", ["--json", "--trace", str(big_trace)], ok_or_refused)
    cfg_trace = tmp / "cfg_trace"
    shutil.copytree(TRACE, cfg_trace)
    cl = (cfg_trace / "rank0.jsonl").read_text().splitlines()
    at = next(i for i, ln in enumerate(cl) if json.loads(ln)["k"] == "cfg")
    cl[at] = cl[at][:-1] + ', "t2": ' + digits + "}"
    cl[at] = cl[at].replace('"t":', '"t": ' + digits + ', "t0":', 1)
    (cfg_trace / "rank0.jsonl").write_text("\n".join(cl) + "\n")
    add(
        "encoding",
        "400-digit time in a trace record",
        ["--json", "--trace", str(cfg_trace)],
        ok_or_refused,
    )
    for top in ("-999999999", "0"):
        add("range", f"--json --top {top}", ["--json", "--top", top])
        add("range", f"report --top {top}", ["report", "--top", top])
        add("range", f"ask --top {top}", ["ask", "--top", top, "loss oscillates"])

    # 7. ranges
    for value in (
        "world_size=0",
        "world_size=-4",
        "adam_beta2=5",
        "adam_beta2=1",
        "grad_accum_steps=0",
        "per_gpu_batch_size=0",
        "warmup_steps=-1",
        "global_batch_ratio=-2",
    ):
        add("range", f"--set {value}", ["--json", "--set", value])
    add(
        "range",
        "answers world_size: 0",
        ["--json", "--answers", str(write("w.yaml", "world_size: 0\n"))],
    )
    add("range", "--describe /dev/null", ["--json", "--describe", "/dev/null"])
    add("range", "--describe empty", ["--json", "--describe", str(write("empty.txt", ""))])
    add("range", "--describe blank", ["--json", "--describe", str(write("blank.txt", " \n\t\n"))])
    add("range", "ask --describe blank", ["ask", "--describe", str(tmp / "blank.txt")])
    add("range", "--kb /etc", ["--json", "--kb", "/etc"])
    add("range", "--kb empty folder", ["--json", "--kb", str((tmp / "empty_kb").resolve())])
    (tmp / "empty_kb").mkdir()
    dup = write(
        "dup_kb/t.yaml",
        "tests:\n  - id: same\n    facts: {world_size: 8}\n    expect_top: other\n"
        "  - id: same\n    facts: {world_size: 4}\n    expect_top: other\n",
    )
    add(
        "range",
        "kb validate duplicate test ids",
        ["kb", "validate", "--kb", str(dup.parent)],
        lambda g: None if g.rc == 2 and "duplicate rule test id" in g.err else f"exit {g.rc}",
    )
    return cases


CACHE_DAMAGE: dict[str, Callable[[bytes], bytes]] = {}


def _header(fn: Callable[[dict], None]) -> Callable[[bytes], bytes]:  # type: ignore[type-arg]
    def apply(data: bytes) -> bytes:
        end = data.index(b"\n")
        doc = json.loads(data[:end])
        fn(doc)
        return json.dumps(doc).encode() + data[end:]

    return apply


def _facts(doc: dict) -> list[dict]:  # type: ignore[type-arg]
    return list(doc["model"]["facts"].values())


CACHE_DAMAGE.update(
    {
        "truncated half": lambda d: d[: len(d) // 2],
        "truncated header": lambda d: d[: d.index(b"\n") // 2],
        "empty": lambda d: b"",
        "binary garbage": lambda d: os.urandom(4096),
        "NaN prior": _header(lambda h: h["model"]["priors"].__setitem__(0, float("nan"))),
        "negative prior": _header(lambda h: h["model"]["priors"].__setitem__(0, -0.5)),
        "empty class list": _header(lambda h: [f.__setitem__("classes", []) for f in _facts(h)]),
        "wrong types": _header(lambda h: h["model"].__setitem__("priors", "common")),
        "missing model": _header(lambda h: h.pop("model")),
        "short priors": _header(lambda h: h["model"].__setitem__("priors", [0.1])),
        "healthy NaN": _header(
            lambda h: [
                f.__setitem__("healthy", [float("nan")] * len(f["healthy"])) for f in _facts(h)
            ]
        ),
        "bad offsets": _header(
            lambda h: h["entries"]["causes"].__setitem__(
                "at", [10**9] * len(h["entries"]["causes"]["at"])
            )
        ),
        "entry garbage": lambda d: d[: d.index(b"\n") + 1] + b"{" * (len(d) - d.index(b"\n") - 1),
        "oversized entry": lambda d: d.replace(b'"title":"', b'"title":"' + b"x" * 50_000_000, 1),
        "rows out of range": _header(
            lambda h: [f.__setitem__("row", [99] * len(f["row"])) for f in _facts(h)]
        ),
    }
)


def cache_cases(tmp: Path, verbose: bool) -> tuple[int, int]:
    argv = ["--json", "--set", "world_size=8", "--set", "uses_distributed_sampler=false"]
    base = tmp / "cache_base"
    first = run(Case("cache", "build", argv), base)
    want = json.loads(first.out)["causes"][0]["id"]
    (built,) = (base / "ddpadvisor").glob("kb-*.json")
    data = built.read_bytes()
    failed = 0
    for name, damage in CACHE_DAMAGE.items():
        home = tmp / f"cache_{abs(hash(name))}"
        (home / "ddpadvisor").mkdir(parents=True)
        os.chmod(home / "ddpadvisor", 0o700)
        target = home / "ddpadvisor" / built.name
        target.write_bytes(damage(data))
        os.chmod(target, 0o600)
        got = run(Case("cache", name, argv), home)
        again = run(Case("cache", name, argv), home)
        why = verdict(Case("cache", name, argv), got)
        if why is None and got.rc != 0:
            why = f"exit {got.rc}"
        if why is None and json.loads(got.out)["causes"][0]["id"] != want:
            why = "another answer"
        if why is None and len(got.err.strip().splitlines()) > 1:
            why = "more than one line on stderr"
        if why is None and (again.rc != 0 or again.err.strip()):
            why = "not rebuilt: the next call still complains"
        if why:
            failed += 1
            if verbose:
                print(f"  FAIL cache: {name}: {why}")
    return failed, len(CACHE_DAMAGE)


def main() -> int:
    verbose = "-v" in sys.argv
    only = {a for a in sys.argv[1:] if not a.startswith("-")}  # class names to run
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cache = tmp / "cache"
        cases = build(tmp)
        totals: dict[str, list[int]] = {}
        for case in cases:
            if only and case.cls not in only:
                continue
            got = run(case, cache)
            why = verdict(case, got)
            t = totals.setdefault(case.cls, [0, 0])
            t[1] += 1
            if why:
                t[0] += 1
                if verbose:
                    print(f"  FAIL {case.cls}: {case.name}: {why}")
        if not only or "cache" in only:
            totals["cache"] = list(cache_cases(tmp, verbose))
    print(f"{'class':<10} failing / cases")
    for cls, (bad, n) in totals.items():
        print(f"{cls:<10} {bad:>3} / {n}")
    bad = sum(b for b, _ in totals.values())
    print(f"{'total':<10} {bad:>3} / {sum(n for _, n in totals.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
