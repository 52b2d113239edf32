"""TrainingArguments read from a config the scan can see (HfArgumentParser.parse_json_file,
parse_yaml_file, parse_dict); a path from the command line leaves the values unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpadvisor.scan import scan_file

SCRIPT = """\
import os
import sys
from pathlib import Path
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
from datasets import load_dataset

here = os.path.dirname(os.path.abspath(__file__))
parser = HfArgumentParser(TrainingArguments)
(args,) = parser.{call}
model = AutoModelForCausalLM.from_pretrained("gpt2")
Trainer(model=model, args=args, train_dataset=load_dataset("x")["train"]).train()
"""


def _scan(tmp_path: Path, call: str, files: dict[str, str]) -> dict[str, object]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(call=call))
    result = scan_file(script)
    return {f.fact: f.value for f in result.findings}


JSON = '{"output_dir": "o", "gradient_accumulation_steps": 4, "fp16": true}'
YAML = "output_dir: o\ngradient_accumulation_steps: 2\nbf16: true\n"


@pytest.mark.parametrize(
    ("call", "files", "accum", "precision"),
    [
        ('parse_json_file(os.path.join(here, "args.json"))', {"args.json": JSON}, 4, "fp16_amp"),
        ('parse_json_file("args.json")', {"args.json": JSON}, 4, "fp16_amp"),
        ('parse_yaml_file(Path(__file__).parent / "a.yaml")', {"a.yaml": YAML}, 2, "bf16_amp"),
        ('parse_dict({"output_dir": "o", "gradient_accumulation_steps": 3})', {}, 3, "fp32"),
    ],
)
def test_config_decides_the_arguments(
    tmp_path: Path, call: str, files: dict[str, str], accum: int, precision: str
) -> None:
    facts = _scan(tmp_path, call, files)
    assert facts["grad_accum_steps"] == accum
    assert facts["precision"] == precision


@pytest.mark.parametrize(
    ("call", "files"),
    [
        ("parse_json_file(sys.argv[1])", {"args.json": JSON}),  # chosen on the command line
        ('parse_json_file("missing.json")', {}),
        ('parse_json_file("args.json")', {"args.json": '{"gradient_accumulation_steps": '}),
        ('parse_json_file("args.json")', {"args.json": "[1, 2]"}),
        ("parse_args_into_dataclasses()", {}),
    ],
)
def test_unseen_config_leaves_values_unknown(
    tmp_path: Path, call: str, files: dict[str, str]
) -> None:
    facts = _scan(tmp_path, call, files)
    assert "grad_accum_steps" not in facts
    assert "precision" not in facts


SUBCLASS = """\
from dataclasses import dataclass, field
import transformers
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer
from datasets import load_dataset


@dataclass
class Args(transformers.TrainingArguments):
    model_max_length: int = field(default=512)


parser = HfArgumentParser(Args)
(args,) = parser.{call}
model = AutoModelForCausalLM.from_pretrained("gpt2")
Trainer(model=model, args=args, train_dataset=load_dataset("x")["train"]).train()
"""


@pytest.mark.parametrize(
    ("call", "accum", "precision"),
    [
        ('parse_json_file("args.json")', 4, "fp16_amp"),  # inherited fields from the file
        ("parse_args_into_dataclasses()", None, None),  # the command line's, not the defaults
    ],
)
def test_a_training_arguments_subclass_reads_inherited_fields(
    tmp_path: Path, call: str, accum: int | None, precision: str | None
) -> None:
    (tmp_path / "args.json").write_text(JSON)
    script = tmp_path / "train.py"
    script.write_text(SUBCLASS.format(call=call))
    result = scan_file(script)
    assert result.value("grad_accum_steps") == accum
    assert result.value("precision") == precision
