"""The agent's checksums, input digests and found-inf sums over tensors on several devices.

A GPU job's state mixes devices: Adam keeps its ``step`` counters on the CPU beside CUDA moments,
a GradScaler keeps a found-inf flag per device of a model split across GPUs, a loop may leave the
labels on the CPU. On an H200 the agent's checksums once stacked them together, raised, and
switched off its replica checks for the whole run. Here the second device is PyTorch's ``meta``
device (shapes without data), which raises the same way on a CPU-only machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ddpadvisor.tracing import agent_dir

PROBE = """
import torch
from types import SimpleNamespace
from ddpadvisor_trace_agent import core

cpu, meta = torch.ones(3), torch.ones(2, 2, device="meta")
fp = core._fingerprint([cpu, meta])
print("fingerprint", tuple(fp.shape), fp.device.type)
state = {"found_inf_per_device": {"cpu": torch.zeros(1), "meta": torch.zeros(1, device="meta")}}
flag = core._found_inf(SimpleNamespace(_per_optimizer_states={0: state}))
print("found_inf", tuple(flag.shape), flag.device.type)
print("stack", tuple(core._stack([torch.zeros(2), torch.zeros(2, device="meta")]).shape))
"""


def test_checksums_stack_tensors_of_several_devices() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}
    env["PYTHONPATH"] = os.pathsep.join([str(agent_dir()), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    # on the first device that is not the CPU, with one row per tensor
    assert lines["fingerprint"] == "(2, 2) meta"
    assert lines["found_inf"] == "() meta"
    assert lines["stack"] == "(2, 2)"
