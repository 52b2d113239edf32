"""Which language the tool speaks, and the lookup of every user-facing text.

Two kinds of text are translated:

* knowledge-base entries carry their Chinese beside the English in a ``zh:`` mapping
  (:func:`text` picks the field in a language, English when no translation exists);
* the fixed strings of the program itself (report headings, labels, TUI titles, buttons and
  footers) live in the one catalogue below, keyed by their English text, gettext style
  (:func:`t`).

Ids, JSON keys and the schema never change with the language. Nothing here imports textual.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, cast

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
DEFAULT: Lang = "en"

# The language the TUI currently speaks; the CLI passes its language explicitly instead.
_current: Lang = DEFAULT


def detect(flag: str | None = None, env: Mapping[str, str] | None = None) -> Lang:
    """``--lang`` if given, else the POSIX locale variables (LC_ALL, then LC_MESSAGES, then
    LANG: the first one set decides, ``zh_*`` meaning Chinese), else English."""
    if flag:
        return as_lang(flag)
    env = os.environ if env is None else env
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(var, "").strip()
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return DEFAULT


def as_lang(value: str) -> Lang:
    """``zh``/``zh_CN``/``zh-Hans`` -> zh, ``en``/``en_US`` -> en; ValueError otherwise."""
    low = value.strip().lower().replace("-", "_")
    for lang in LANGS:
        if low == lang or low.startswith(lang + "_"):
            return lang
    raise ValueError(f"unknown language {value!r} (one of: {', '.join(LANGS)})")


def set_current(lang: Lang) -> None:
    global _current
    _current = lang


def current() -> Lang:
    return _current


def t(msg: str, lang: Lang | None = None, /, **fields: object) -> str:
    """The catalogue text of ``msg`` (its English) in ``lang`` (default: the current one),
    with ``{name}`` fields filled in. A message missing from the catalogue stays English."""
    lang = _current if lang is None else lang
    out = ZH.get(msg, msg) if lang == "zh" else msg
    return out.format(**fields) if fields else out


def text(entry: Any, field: str, lang: Lang) -> Any:
    """Field ``field`` of a KB entry in ``lang``; English when there is no translation.

    A fix's ``expect`` is its ``verify.expect`` (translated at the fix's level)."""
    if lang != "en":
        zh = cast("dict[str, Any] | None", getattr(entry, lang, None))
        if zh and zh.get(field):
            return zh[field]
    if field == "expect" and hasattr(entry, "verify"):
        return entry.verify.expect
    return getattr(entry, field)


def untranslated(entry: Any, lang: Lang = "zh") -> list[str]:
    """The translated fields of ``entry`` that have English text but none in ``lang``
    (a list field also counts when its translation has a different number of items)."""
    if lang == "en":
        return []
    zh = cast("dict[str, Any]", getattr(entry, lang, None) or {})
    missing = []
    for field in getattr(entry, "TRANSLATED", ()):
        english = entry.verify.expect if field == "expect" else getattr(entry, field, None)
        if not english:
            continue
        got = zh.get(field)
        if not got or (isinstance(english, list) and len(got) != len(english)):
            missing.append(field)
    return missing


def value_label(value: object, lang: Lang | None = None) -> str:
    """How a fact's value reads: true/false in English (as typed on the command line), 是/否
    in Chinese; anything else as written."""
    lang = _current if lang is None else lang
    if isinstance(value, bool):
        english = "true" if value else "false"
        return english if lang == "en" else t("yes" if value else "no", lang)
    return str(value)


# -- the catalogue ----------------------------------------------------------------------------
# English text -> Chinese. Keep identifiers, API names, commands and {fields} as they are.
ZH: dict[str, str] = {
    "Describe the problem in my own words (or paste a forum post)…": (
        "用自己的话描述问题（也可以直接贴论坛帖子）…"
    ),
    # the describe screen (tui/screens/describe.py)
    "Describe the problem in your own words, or paste your forum post (English or 中文): "
    "GPUs, batch, precision, what the loss does, and your training loop if you can: code is "
    "scanned. ctrl+r reads it.": (
        "用自己的话描述问题，或者直接贴论坛帖子（中文或英文都行）：几张卡、batch、精度、"
        "loss 是什么走势，能贴训练循环的话也贴上：代码会被扫描。按 ctrl+r 读取。"
    ),
    "Reading your description…": "正在读取你的描述…",
    "Could not read it: {problem}": "读取失败：{problem}",
    "Still reading your description…": "还在读取你的描述…",
    "  (replaces {value})": "  （替换 {value}）",
    "adds to your earlier description ({n} facts kept)": "补充到之前的描述里（保留 {n} 项事实）",
    "from your description: \u201c{phrase}\u201d": "从你的描述里读到：\u201c{phrase}\u201d",
    "Loading the knowledge base…": "正在加载知识库…",
    # the question panel (tui/widgets/question.py, tui/session.py)
    "{kind}{range} · Enter answers · Esc leaves the field": "{kind}{range} · 回车确认 · Esc 离开输入框",
    "{fact} must be {range}, got {value}": "{fact} 必须 {range}，输入的是 {value}",
    "Leave the field": "离开输入框",
    "Describe the problem": "描述问题",
    "your description reads like this cause: {words}": "你的描述读起来像这个原因：{words}",
    "reads like {cause}": "像是 {cause}",
    # ddpadvisor ask (cli.py)
    "From your description:": "从你的描述里读到：",
    "(nothing recognised; answer the questions below, or run ddpadvisor)": (
        "（没有识别出任何事实；回答下面的问题，或者运行 ddpadvisor）"
    ),
    "code": "代码",
    "Correct any of these with --set FACT=VALUE (or FACT=unknown).": (
        "读错的可以用 --set FACT=VALUE（或 FACT=unknown）改正。"
    ),
    "Your description reads like:": "你的描述读起来像：",
    "Nothing recognised. Add details, or Esc to answer questions instead.": (
        "没有识别出任何事实。再补充些细节，或者按 Esc 改为回答问题。"
    ),
    "Found {n} facts. Untick any that are wrong (space), then ctrl+s to use the rest.": (
        "找到 {n} 项事实。把不对的取消勾选（空格），然后按 ctrl+s 使用其余的。"
    ),
    "Read it": "读取",
    "Use ticked facts": "使用勾选的事实",
    "Verify failed": "验证失败",
    "Verify passed": "验证通过",
    # next steps and the catch-all's verdicts (engine/diagnose.py)
    "Run the {probe} probe": "运行 {probe} 探针",
    "Trace your training script for a few steps": "用 trace 跑几步你的训练脚本",
    "Attach a file you already have: the run's log or trainer_state.json, its config, its launch command or pip list": (
        "附上你手头已有的文件：训练日志或 trainer_state.json、配置文件、启动命令或 pip list"
    ),
    "Scan your training script": "静态扫描你的训练脚本",
    "Would settle: ": "可以确定：",
    "Nothing catalogued fits (a symptom a healthy job rarely shows, but no known cause explains it)": (
        "没有已收录的原因能解释（这个症状在正常任务里很少见，但知识库里的原因都对不上）"
    ),
    "Looks healthy (nothing observed departs from a normal DDP job)": (
        "看起来正常（观测到的情况和一个健康的 DDP 任务没有差别）"
    ),
    # engine: summary, catch-all, claims, conflicts
    "Most likely: {cause} ({score}) — {title}. ": "最可能的原因：{cause}（{score}）—— {title}。",
    "A probe or trace run failed (exit 3): the ranking below rests only on what it recorded "
    "before; the warnings at the end say which rank and why.": (
        "有一次 probe 或 trace 运行失败了（退出码 3）：下面的排名只依据它失败之前记录下来的内容；"
        "末尾的警告写明了是哪个 rank、为什么失败。"
    ),
    "No cause stands out yet; best so far: {cause} ({score}) — {title}. ": (
        "还没有哪个原因明显突出；目前最靠前的是：{cause}（{score}）—— {title}。"
    ),
    "{n} facts observed": "已观测 {n} 项事实",
    ". Settled.": "，结论已定。",
    "; next: {fact}.": "；下一步：{fact}。",
    "No catalogued fault (healthy job, or a cause the KB does not know)": (
        "没有命中已收录的故障（训练本身正常，或是知识库尚未收录的原因）"
    ),
    "Nothing observed so far points at a catalogued cause more than a healthy DDP job would. "
    "Either the job is fine (early noise, a normal fine-tuning curve) or the fault is not in the "
    "knowledge base yet: gather more evidence (a trace of the real job is the strongest).": (
        "目前观测到的现象，放在一个正常的 DDP 任务上也一样会出现，没有哪个已收录的原因因此更可疑。"
        "要么训练其实没问题（早期噪声、正常的微调曲线），要么故障还不在知识库里：请继续收集证据，"
        "对真实任务做一次 trace 最有说服力。"
    ),
    "Refuted by how PyTorch works (see reason)": "与 PyTorch 的实际机制不符（见理由）",
    "; your situation: {facts}": "；与你相关的事实：{facts}",
    "{cause} ranks #{rank} at {score} on this evidence": (
        "在现有证据下 {cause} 排第 {rank}，概率 {score}"
    ),
    "Sound advice in general, but the evidence here rules out {causes}": (
        "一般来说是好建议，但现有证据已排除 {causes}"
    ),
    "{fact}: {winner} says {value}{where} and wins over {loser} {lvalue}{lwhere}": (
        "{fact}：{winner} 给出 {value}{where}，优先于 {loser} 给出的 {lvalue}{lwhere}"
    ),
    # evidence sources (display only; the JSON keeps the ids)
    "description": "描述（待确认）",
    "answer": "回答",
    "set": "命令行",
    "script": "脚本扫描",
    "log": "日志/配置文件",
    "probe": "探针",
    "trace": "trace",
    "yes": "是",
    "no": "否",
    # report
    "Ranked causes (score = posterior probability; evidence sizes are log10 LR):": (
        "原因排序（分数为后验概率；证据强度为 log10 似然比）："
    ),
    "via": "经由",
    "in this way: {mode}": "具体是：{mode}",
    "Why {cause}:": "为什么是 {cause}：",
    "Fix: {title}": "修复：{title}",
    "before:": "修改前：",
    "after:": "修改后：",
    "verify:": "验证：",
    "expect:": "预期：",
    "Most informative next steps:": "最有信息量的下一步：",
    "gain {gain} bits": "信息增益 {gain} bit",
    "ask": "提问",
    "Forum advice, judged on this evidence:": "论坛上的建议，按现有证据评判：",
    "Facts used:": "用到的事实：",
    "Warnings:": "警告：",
    "ddpadvisor diagnosis": "ddpadvisor 诊断报告",
    "Ranked causes": "原因排序",
    "cause": "原因",
    "score": "分数",
    "strongest evidence": "最强证据",
    "Before:": "修改前：",
    "After:": "修改后：",
    "Verify:": "验证：",
    "References:": "参考资料：",
    "Next steps": "下一步",
    "Forum advice": "论坛建议",
    "stance": "结论",
    "verdict": "评价",
    "advice": "建议",
    "source": "来源",
    "Facts": "事实",
    "Warnings": "警告",
    # claim stances and verdicts
    "REFUTED": "不成立",
    "CONFIRMED": "已证实",
    "RULED OUT": "已排除",
    "refuted": "不成立",
    "confirmed": "已证实",
    "ruled-out": "已排除",
    "correct": "正确",
    "partly-correct": "部分正确",
    "myth": "误解",
    "harmful": "有害",
    # TUI: keys (footer)
    "Quit": "退出",
    "Keys": "按键",
    "Light/dark": "明/暗",
    "Answer": "回答",
    "Answer {n}": "回答 {n}",
    "Don't know": "不知道",
    "Unknown": "不知道",
    "Skip": "跳过",
    "Back": "返回",
    "View": "视图",
    "Fixes": "修复",
    "Run probes": "运行探针",
    "Trace": "Trace",
    "Load": "加载",
    "Save": "保存",
    "Copy verify command": "复制验证命令",
    "Copy code": "复制代码",
    "Close": "关闭",
    "Choose": "选择",
    "Choose {n}": "选择 {n}",
    "Cancel": "取消",
    "Causes": "原因",
    "Advice": "建议",
    "Plots": "曲线",
    "Open fix": "打开修复",
    "Export": "导出",
    "Cancel/close": "取消/关闭",
    "中文": "English",
    "l: 中文": "l: English",
    "Export the session": "导出会话",
    "Fixes · Enter opens one": "修复 · 回车打开",
    "  ({cost})": "  （改动成本：{cost}）",
    "trivial": "极低",
    "low": "低",
    "medium": "中",
    "high": "高",
    "No fix: this is not a fault to repair.": "没有修复：这不是需要修的故障。",
    "Before": "修改前",
    "After": "修改后",
    "Verify (c copies the command)": "验证（按 c 复制命令）",
    "Expect: ": "预期：",
    "Shown by: ": "实验：",
    "Causes & fixes": "原因与修复",
    "Type a file name.": "请输入文件名。",
    "all probes": "全部探针",
    "probe {names} on {n} ranks": "在 {n} 个 rank 上运行探针 {names}",
    "trace {script} on {n} ranks": "在 {n} 个 rank 上 trace {script}",
    "starting…": "正在启动…",
    "failed": "失败",
    "done": "完成",
    "cancelled": "已取消",
    "crashed: ": "崩溃：",
    " · nothing was added to the evidence": " · 没有向证据中添加任何内容",
    "MISMATCH": "不一致",
    "ok": "正常",
    # TUI: diagnose screen
    "Settled on {cause}": "结论：{cause}",
    "{fact} comes from {source} ({where}); a measured or scanned value wins over an answer.": (
        "{fact} 来自{source}（{where}）；实测或扫描得到的值优先于回答。"
    ),
    "no location": "无位置",
    "No answer to go back to yet.": "还没有可以返回修改的回答。",
    "Showing {view}": "正在显示：{view}",
    "ranking": "排序",
    "why": "原因分析",
    "history": "历史",
    "Loaded {count} facts from {name}": "已从 {name} 加载 {count} 项事实",
    "Choose 'Trace my training script now' and give its path.": (
        "请选择“现在 trace 我的训练脚本”，并给出脚本路径。"
    ),
    # TUI: question panel
    "Nothing left to ask": "没有要问的了",
    "No question is worth asking any more. ": "已经没有值得再问的问题了。",
    " shows the results and fixes, ": " 查看结果和修复，",
    " adds evidence.": " 添加证据。",
    "{settled} · more answers are optional": "{settled} · 其余问题可选",
    "Run probe '{probe}' now": "现在运行探针 '{probe}'",
    "Trace my training script": "trace 我的训练脚本",
    "Skip: ask something else": "跳过：换个问题",
    "  (current)": "  （当前）",
    "don't know": "不知道",
    "a whole number": "一个整数",
    "a number": "一个数",
    "text": "文本",
    'Type a value, or choose "don\'t know".': "请输入一个值，或选择“不知道”。",
    "{fact} expects {kind}, got {raw}": "{fact} 需要{kind}，收到的是 {raw}",
    "Change your answer · {fact}": "修改回答 · {fact}",
    "Next step: measure": "下一步：测量",
    "Next step: trace": "下一步：trace",
    "Question": "问题",
    " · {gain} bits": " · {gain} bit",
    # TUI: summary bar
    "· most likely ": "· 最可能 ",
    "· {facts} facts, {answered} answered here · ": "· {facts} 项事实，本次答 {answered} · ",
    "· {facts} facts · ": "· {facts} 项事实 · ",
    "settled": "已定",
    "asking": "询问中",
    " · {n} warnings": " · {n} 条警告",
    # TUI: ranking, why
    "Causes, most likely first": "原因（按可能性排序）",
    " (no catalogued fault)": "（无已收录故障）",
    "Why": "原因分析",
    "Why {cause}": "为什么是 {cause}",
    "  (prior {prior})": "  （先验 {prior}）",
    "Moved by (log10 likelihood ratio):": "影响它的证据（log10 似然比）：",
    "No observation bears on it yet: it stands on its prior and on what moved the others.": (
        "还没有观测与它相关：它的位置取决于先验，以及其他原因被证据推动的程度。"
    ),
    "Mechanism": "机理",
    # TUI: claims, history
    "Forum advice: {counts}": "论坛建议：{counts}",
    ", ": "，",
    "none bears on this evidence yet": "暂无与现有证据相关的",
    "{n} refuted": "{n} 条不成立",
    "{n} confirmed": "{n} 条已证实",
    "{n} ruled-out": "{n} 条已排除",
    "No forum advice bears on the evidence so far. Answer a few questions, or see every claim "
    "with 'ddpadvisor claims'.": (
        "目前还没有论坛建议与现有证据相关。先回答几个问题，或用 'ddpadvisor claims' 查看全部建议。"
    ),
    "Evidence · Enter changes an answer": "证据 · 回车修改回答",
    # TUI: evidence screen
    "Nothing yet: ask me questions": "什么都还没有：直接问我问题",
    "A training script (read, never run)…": "一个训练脚本（只读取，不运行）…",
    "A trace folder from 'ddpadvisor trace'…": "'ddpadvisor trace' 生成的 trace 目录…",
    "Probe results from 'ddpadvisor probe'…": "'ddpadvisor probe' 生成的探针结果…",
    "An answers file or a saved session (.yaml/.json)…": "回答文件或保存的会话（.yaml/.json）…",
    "Run the probes now, on this machine": "现在就在这台机器上运行探针",
    "Trace my training script now…": "现在 trace 我的训练脚本…",
    "Which evidence do you have? Answers you give, a script scan, probes and a trace all "
    "combine; measured facts win over scanned ones, and those over answers.": (
        "你手上有哪些证据？回答、脚本扫描、探针和 trace 可以一起用；"
        "实测的事实优先于扫描结果，扫描结果又优先于回答。"
    ),
    "Start: what do you have?": "开始：你手上有什么？",
    "Add evidence": "添加证据",
    "{placeholder}  (Enter to {verb}, Esc to go back)": "{placeholder}  （回车{verb}，Esc 返回）",
    "trace it": "开始 trace",
    "load it": "加载",
    "Type a path first.": "请先输入路径。",
    "{path}: not a folder": "{path}：不是目录",
    "{path}: no such file": "{path}：文件不存在",
    # TUI: export, fix, results, run
    "A .json name saves the --json document (load it again with o); any other name saves a "
    "Markdown report. Enter saves.": (
        "文件名以 .json 结尾时保存 --json 文档（之后可用 o 重新加载）；"
        "其他文件名保存为 Markdown 报告。回车保存。"
    ),
    "Saved {fmt} to {path}": "已将 {fmt} 保存到 {path}",
    "Copied: {command}": "已复制：{command}",
    "This fix has no code.": "这个修复没有代码。",
    "Copied the fixed code.": "已复制修复后的代码。",
    "Fix for {cause}": "{cause} 的修复",
    "Verify": "验证",
    "fact": "事实",
    "value": "值",
    "where": "位置",
    "overrode": "覆盖了",
    "The selected cause has no fix.": "所选原因没有对应的修复。",
    "Per-rank plots": "各 rank 曲线",
    "loss per rank": "各 rank 的 loss",
    "GradScaler scale": "GradScaler scale",
    "grad norm": "梯度范数",
    "step": "step",
    "rank {rank} ": "rank {rank} ",
    " (identical on every rank)": "（各 rank 完全一致）",
    "{title}: no data in this trace": "{title}：这份 trace 里没有数据",
    "{title}: too small to draw": "{title}：空间太小，画不下",
    "No trace loaded. Trace your script (t on the question screen, or "
    "'ddpadvisor trace --out DIR -- train.py'), then load the folder with o.": (
        "还没有加载 trace。先 trace 你的脚本（在提问界面按 t，或运行 "
        "'ddpadvisor trace --out DIR -- train.py'），再按 o 加载生成的目录。"
    ),
    "trace {name}: {ranks} ranks{skipped}": "trace {name}：{ranks} 个 rank{skipped}",
    " · {n} unreadable lines skipped": " · 跳过 {n} 行无法读取的内容",
    "rank": "rank",
    "check": "检查项",
    "result": "结果",
    "no facts": "没有事实",
    " · measured {n}: {facts}": " · 测得 {n} 项：{facts}",
    # the curves of attached files (tui/curves.py, tui/widgets/curves_plot.py, describe.py)
    "files or folders you have: train.log trainer_state.json runs/ …": (
        "你手头的文件或目录：train.log trainer_state.json runs/ …"
    ),
    "a good run's log to compare with (optional)": "用来对比的正常运行的日志（可不填）",
    "Reading your description and files…": "正在读取你的描述和文件…",
    "{files} ctrl+s attaches them.": "{files}按 ctrl+s 附加这些文件。",
    "{read} of {named} files read, {lines} loss curves.": (
        "读取了 {named} 个文件中的 {read} 个，{lines} 条 loss 曲线。"
    ),
    "rank {rank}": "rank {rank}",
    "reference {label}": "对照 {label}",
    "reference": "对照",
    "nothing read": "什么也没读到",
    "{name}: read, no loss curve in it": "{name}：已读取，其中没有 loss 曲线",
    "loss": "loss",
    "spike": "尖峰",
    "NaN or inf": "NaN 或 inf",
    "too small to draw": "空间太小，画不下",
    "{label}: {file}, steps {first}-{last}": "{label}：{file}，第 {first}-{last} 步",
    " · {n} spike(s) at step {steps}": " · 第 {steps} 步有 {n} 个尖峰",
    " · NaN or inf at {n} steps from step {step}": " · 从第 {step} 步起有 {n} 步为 NaN 或 inf",
    "A log, config or env dump I have (a file or a folder)…": (
        "我手头的日志、配置或环境信息（文件或目录）…"
    ),
    "metrics.csv or runs/": "metrics.csv 或 runs/",
    "{path}: no such file or folder": "{path}：文件或目录不存在",
    "your text": "你贴的文本",
    "Your text holds a training log: its loss is drawn.": "你贴的文本里有训练日志：已画出它的 loss。",
}
