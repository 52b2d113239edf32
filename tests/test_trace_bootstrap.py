"""The injected sitecustomize: chains the one it shadows, waits for torch, stays inert otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpadvisor.tracing import ENV_DIR, agent_dir


def _python(code: str, env_extra: dict[str, str], pythonpath: list[Path]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def test_shadowed_sitecustomize_still_runs_and_torch_is_not_imported(tmp_path):  # type: ignore[no-untyped-def]
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_HOOK_RAN'] = 'yes'\n")
    out = _python(
        "import os, sys; print(os.environ.get('SITE_HOOK_RAN'), 'torch' in sys.modules)",
        {ENV_DIR: str(tmp_path / "trace")},
        [agent_dir(), site],
    )
    assert out == "yes False"


@pytest.mark.slow  # two fresh interpreters import torch
def test_agent_installs_after_torch_import_only_when_enabled(tmp_path):  # type: ignore[no-untyped-def]
    code = (
        "import torch; print(getattr(torch, '_ddpadvisor_agent', False), "
        "getattr(torch.Tensor.backward, '__ddpadvisor__', False))"
    )
    assert _python(code, {ENV_DIR: str(tmp_path / "t")}, [agent_dir()]) == "True True"
    assert _python(code, {}, [agent_dir()]) == "False False"
    assert not (tmp_path / "t").exists()  # nothing is written before a process group exists
