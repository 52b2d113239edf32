"""The agent's reading of the constant factor on the loss right before backward, through DDP's
``_DDPSink`` (the identity DDP puts on its outputs when it must find unused parameters, as the
HF Trainer asks it to): the Trainer's ``loss / num_items_in_batch * num_processes`` must read
as a division, not as a bare ``* num_processes``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ddpadvisor.tracing import agent_dir

PROBE = """
import gc, os, torch, torch.distributed as dist
from ddpadvisor_trace_agent.core import _loss_factor
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
dist.init_process_group("gloo", rank=0, world_size=1)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.unused = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    def forward(self, x, count):
        y = self.used(x)
        return {"logits": y, "loss": (y ** 2).sum() / count}

for find_unused in (True, False):
    ddp = torch.nn.parallel.DistributedDataParallel(Net(), find_unused_parameters=find_unused)
    out = ddp(torch.randn(2, 4), torch.tensor(8.0))
    print(find_unused, _loss_factor(out["loss"] * 2, [])[0], _loss_factor(out["loss"], [])[0])
    del ddp, out
gc.collect()
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def probes() -> subprocess.CompletedProcess[str]:
    """Both probes below in one fresh interpreter with the agent on its path (one torch
    import): the DDP one first, then the identity wrappers, each printing its own lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}
    env["PYTHONPATH"] = os.pathsep.join([str(agent_dir()), env.get("PYTHONPATH", "")])
    env["PORT"] = str(29400 + os.getpid() % 500)
    return subprocess.run(
        [sys.executable, "-c", PROBE + IDENTITY_PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_loss_factor_is_read_through_the_ddp_sink(probes: subprocess.CompletedProcess[str]) -> None:
    proc = probes
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(("True", "False"))]
    # ``* 2`` on a loss divided by 8: 2/8 with and without the sink
    assert [(r[0], float(r[1]), float(r[2])) for r in rows] == [
        ("True", 0.25, 0.125),
        ("False", 0.25, 0.125),
    ]


IDENTITY_LINES = ("zero3 ", "hooked ", "opaque ")
IDENTITY_PROBE = """
import torch
from ddpadvisor_trace_agent.core import _loss_factor

class PreBackwardFunctionForModule(torch.autograd.Function):
    # the shape of DeepSpeed ZeRO-3's wrapper on a module's outputs: identity, runs code in backward
    @staticmethod
    def forward(ctx, out):
        return out.detach()
    @staticmethod
    def backward(ctx, grad):
        return grad

class Halve(torch.autograd.Function):
    # a custom function that is no identity: the walk must stop at it
    @staticmethod
    def forward(ctx, out):
        return out / 2
    @staticmethod
    def backward(ctx, grad):
        return grad / 2

class LossNet(torch.nn.Module):
    # returns its own loss, as HF models do; a full backward hook wraps that output
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)
    def forward(self, x):
        return self.lin(x).pow(2).sum() / torch.tensor(4.0)

net = LossNet()
net.register_full_backward_hook(lambda *a: None)
x = torch.randn(3, 4)
loss = net.lin(x).pow(2).sum() / torch.tensor(8.0)
print("zero3", _loss_factor(PreBackwardFunctionForModule.apply(loss) * 2, [])[0])
print("hooked", _loss_factor(net(x) * 2, [])[0])
print("opaque", _loss_factor(Halve.apply(loss) * 2, [])[0])
"""


def test_loss_factor_is_read_through_identity_wrappers_only(
    probes: subprocess.CompletedProcess[str],
) -> None:
    """ZeRO-3 wraps module outputs in an identity autograd function: the Trainer's
    ``loss / num_items_in_batch * num_processes`` read there as a bare ``* 2`` (2 ranks), i.e.
    a loss multiplied by the world size and not divided by the accumulation."""
    proc = probes
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = dict(line.split() for line in proc.stdout.splitlines() if line.startswith(IDENTITY_LINES))
    assert float(got["zero3"]) == 0.25  # * 2 / 8, through the wrapper
    assert float(got["opaque"]) == 2.0  # the walk stops at a function it does not know
    assert float(got["hooked"]) == 0.5  # * 2 / 4, through the hook on the module's output


TERMS_PROBE = """
import torch
from ddpadvisor_trace_agent.core import _loss_factor
w = torch.nn.Parameter(torch.ones(3))
a, b, c = (w * 2).sum(), (w * 3).mean(), w.pow(2).sum()
for name, loss in {
    "avg2": (a + b) / 2, "avg3": (a + b + c) / 2, "single": a / 2,
    "term_divided": a * 4 / 2 + b, "difference": (a - b) * 0.5, "plus_constant": (a + 1.0) / 2,
}.items():
    factor, _, terms = _loss_factor(loss, [])
    print(name, factor, terms)
"""


def test_terms_summed_below_the_loss_factor_are_counted() -> None:
    """(a + b) / 2 sums two terms below the factor (so it may average them rather than divide
    by a world size of 2); a constant added in is no term; a factor inside a term is not
    read, and the sum above it shows that."""
    env = {**os.environ, "PYTHONPATH": str(agent_dir())}
    proc = subprocess.run(
        [sys.executable, "-c", TERMS_PROBE], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = {n: (float(f), int(t)) for n, f, t in (line.split() for line in proc.stdout.splitlines())}
    assert got == {
        "avg2": (0.5, 2),
        "avg3": (0.5, 3),
        "single": (0.5, 1),
        "term_divided": (1.0, 2),
        "difference": (0.5, 2),
        "plus_constant": (0.5, 1),
    }
