"""Chinese as well as English: language choice, the catalogue, KB translations, the report's
share of Chinese lines, the JSON document and `kb validate` / `kb test --lang`."""

from __future__ import annotations

import ast
import json
import os
import re
import string
import subprocess
from pathlib import Path

import pytest

from ddpadvisor.i18n import ZH, detect, t, text, untranslated
from ddpadvisor.kb.load import default_dirs, load_kb
from tests.conftest import PYTHON, REPO

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
LETTER = re.compile(r"[^\W\d_]")  # any letter, Latin or CJK
EXAMPLE = REPO / "examples" / "thread-000.yaml"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANG")}
    env.update(extra)
    return env


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "ddpadvisor", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(**env),
        cwd=REPO,
    )


def chinese_share(report: str) -> tuple[int, int]:
    """(lines with CJK characters, lines that hold text at all: any letter)."""
    text_lines = [ln for ln in report.splitlines() if LETTER.search(ln)]
    return sum(1 for ln in text_lines if CJK.search(ln)), len(text_lines)


# -- choosing the language ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flag", "env", "want"),
    [
        ("zh", {"LANG": "en_US.UTF-8"}, "zh"),
        ("en", {"LANG": "zh_CN.UTF-8"}, "en"),
        (None, {"LANG": "zh_CN.UTF-8"}, "zh"),
        (None, {"LANG": "zh_TW.UTF-8"}, "zh"),
        (None, {"LC_ALL": "en_GB.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
        (None, {"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        (None, {"LC_ALL": "", "LANG": "zh_CN"}, "zh"),
        (None, {"LANG": "C.UTF-8"}, "en"),
        (None, {}, "en"),
    ],
)
def test_language_comes_from_flag_then_locale_then_english(
    flag: str | None, env: dict[str, str], want: str
) -> None:
    assert detect(flag, env) == want


def test_catalogue_lookup_falls_back_to_english() -> None:
    assert t("Fixes", "zh") == "修复"
    assert t("Fixes", "en") == "Fixes"
    assert t("a message nobody translated", "zh") == "a message nobody translated"
    assert t("Fix: {title}", "zh", title="x") == "修复：x"


def test_catalogue_keeps_every_placeholder() -> None:
    def fields(s: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(s) if f}

    bad = {en: zh for en, zh in ZH.items() if fields(en) != fields(zh)}
    assert bad == {}


def _catalogue_calls() -> list[tuple[str, int, str]]:
    """Every t("literal", ...) in the package: (file, line, literal)."""
    out = []
    for path in (REPO / "ddpadvisor").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "t"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                out.append((path.name, node.lineno, node.args[0].value))
    return out


def test_every_fixed_string_the_code_looks_up_is_in_the_catalogue() -> None:
    calls = _catalogue_calls()
    assert len(calls) > 40  # the report, the engine and the TUI all go through t()
    missing = [f"{f}:{n}: {msg!r}" for f, n, msg in calls if msg not in ZH]
    assert missing == []


def test_entry_text_falls_back_to_english_field_by_field() -> None:
    kb = load_kb(default_dirs())
    fix = kb.fixes["wrap-after-peft"]
    assert "get_peft_model" in text(fix, "steps", "zh")[0]  # identifiers stay as they are
    assert CJK.search(text(fix, "title", "zh"))
    assert text(fix, "title", "en") == fix.title
    assert text(fix, "expect", "en") == fix.verify.expect
    saved = fix.zh
    fix.zh = {"title": "只有标题"}
    try:
        assert text(fix, "steps", "zh") == fix.steps
        assert untranslated(fix) == ["steps", "expect"]
    finally:
        fix.zh = saved


# -- every bundled entry has Chinese --------------------------------------------------------------
KB = load_kb(default_dirs())


@pytest.mark.parametrize("kind", ["causes", "fixes", "mechanisms"])
def test_every_bundled_entry_has_chinese(kind: str) -> None:
    entries = getattr(KB, kind)
    assert entries
    missing = {id_: untranslated(e) for id_, e in entries.items() if untranslated(e)}
    assert missing == {}
    for e in entries.values():  # the Chinese is Chinese, not a copy of the English
        assert CJK.search(text(e, "title", "zh")), e.id


def test_every_fact_question_has_chinese() -> None:
    missing = [f.id for f in KB.facts.values() if "question" in untranslated(f)]
    assert missing == []


def test_every_claim_has_chinese() -> None:
    missing = {c.id: untranslated(c) for c in KB.claims.values() if untranslated(c)}
    assert missing == {}


# -- the report ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "env"),
    [(("--lang", "zh"), {"LANG": "en_US.UTF-8"}), ((), {"LANG": "zh_CN.UTF-8"})],
    ids=["flag", "LANG"],
)
def test_chinese_report_is_mostly_chinese(args: tuple[str, ...], env: dict[str, str]) -> None:
    proc = _run("report", *args, "--answers", str(EXAMPLE), **env)
    assert proc.returncode == 0, proc.stderr
    zh, total = chinese_share(proc.stdout)
    print(f"report {' '.join(args) or 'LANG=zh_CN.UTF-8'}: {zh}/{total} = {zh / total:.1%} Chinese")
    assert total > 40
    assert zh / total >= 0.60
    # identifiers, commands and code stay as they are
    assert "lr-scaled-too-aggressively" in proc.stdout
    assert "ddpadvisor trace --out trace-sqrt-lr -- train.py" in proc.stdout
    assert "lr = base_lr * math.sqrt(global_batch / base_batch)" in proc.stdout


def test_english_stays_the_default() -> None:
    plain = _run("report", "--answers", str(EXAMPLE))
    english = _run("report", "--lang", "en", "--answers", str(EXAMPLE), LANG="zh_CN.UTF-8")
    assert plain.stdout == english.stdout
    assert chinese_share(plain.stdout)[0] == 0


def test_chinese_text_wraps_by_cells() -> None:
    from ddpadvisor.report.text import cells, wrap

    para = "在用 DDP 包装之前应用 get_peft_model，" * 8
    lines = wrap(para, 40, indent="  ", subsequent="    ")
    assert len(lines) > 3
    assert all(cells(ln) <= 40 for ln in lines)
    assert "".join(ln.strip() for ln in lines).replace(" ", "") == para.replace(" ", "")
    assert not any(ln.lstrip().startswith("，") for ln in lines)  # no line opens on a comma


def test_markdown_report_in_chinese() -> None:
    proc = _run("report", "--markdown", "--lang", "zh", "--answers", str(EXAMPLE))
    assert proc.returncode == 0
    assert "# ddpadvisor 诊断报告" in proc.stdout
    assert "### 修复：" in proc.stdout


# -- JSON ---------------------------------------------------------------------------------------
def _keys(x: object) -> object:
    if isinstance(x, dict):
        return {k: _keys(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_keys(v) for v in x]
    return None


def test_json_in_chinese_validates_and_keeps_ids_and_keys() -> None:
    import jsonschema

    schema = json.loads((REPO / "schemas" / "diagnosis.schema.json").read_text())
    docs = {}
    for lang in ("en", "zh"):
        proc = _run("--json", "--lang", lang, "--answers", str(EXAMPLE))
        assert proc.returncode == 0, proc.stderr
        docs[lang] = json.loads(proc.stdout)
        jsonschema.validate(docs[lang], schema)
        assert docs[lang]["lang"] == lang
    en, zh = docs["en"], docs["zh"]
    assert _keys(en) == _keys(zh)
    assert [c["id"] for c in en["causes"]] == [c["id"] for c in zh["causes"]]
    assert [c["score"] for c in en["causes"]] == [c["score"] for c in zh["causes"]]
    assert CJK.search(zh["causes"][0]["title"]) and not CJK.search(en["causes"][0]["title"])
    assert CJK.search(zh["summary"])
    assert (
        zh["causes"][0]["fixes"][0]["verify"]["command"]
        == (en["causes"][0]["fixes"][0]["verify"]["command"])
    )


def test_saved_english_json_without_lang_still_renders(tmp_path: Path) -> None:
    proc = _run("--json", "--answers", str(EXAMPLE))
    doc = json.loads(proc.stdout)
    del doc["lang"]  # a document saved before the field existed
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(doc))
    out = _run("report", "--from-json", str(saved))
    assert out.returncode == 0, out.stderr
    assert "Ranked causes" in out.stdout


# -- kb validate / kb test ----------------------------------------------------------------------
UNTRANSLATED = """\
causes:
  - id: my-cause
    title: My cause
    area: data
    prior: rare
    mechanism: A thing happens.
    evidence:
      - {fact: uses_lora, is: true, strength: strong}
    fixes: [my-fix]
fixes:
  - id: my-fix
    title: Fix it
    steps: [Do the thing.]
    verify: {command: ddpadvisor kb test, expect: passes}
    zh: {title: 修好它, steps: [做这件事。], expect: 通过}
tests:
  - id: my-cause-first
    facts: {uses_lora: true, module_created_after_wrap: false}
    expect_in_top: [my-cause]
    k: 40
"""


def test_kb_validate_warns_about_a_missing_translation(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(UNTRANSLATED, encoding="utf-8")
    proc = _run("kb", "validate", "--kb", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    warned = [ln for ln in proc.stderr.splitlines() if "mine.yaml" in ln]
    assert warned == [
        f"{tmp_path / 'mine.yaml'}:2: warning: cause 'my-cause' has no zh text for title, mechanism"
    ]
    assert "warning(s): missing zh text" in proc.stdout


def test_a_bad_translation_field_is_an_error(tmp_path: Path) -> None:
    bad = UNTRANSLATED.replace("expect: 通过}", "verdict: 通过}")
    (tmp_path / "mine.yaml").write_text(bad, encoding="utf-8")
    proc = _run("kb", "validate", "--kb", str(tmp_path))
    assert proc.returncode == 2
    assert "mine.yaml:" in proc.stderr and "zh" in proc.stderr


def test_kb_test_checks_the_chosen_language(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(UNTRANSLATED, encoding="utf-8")
    zh = _run("kb", "test", "--kb", str(tmp_path), "--lang", "zh")
    en = _run("kb", "test", "--kb", str(tmp_path), "--lang", "en")
    assert zh.returncode == 0 and en.returncode == 0, zh.stdout + zh.stderr
    assert "cause 'my-cause' shown by test 'my-cause-first' has no zh text" in zh.stdout
    assert "fix 'my-fix'" not in zh.stdout  # translated
    assert "WARN" not in en.stdout
