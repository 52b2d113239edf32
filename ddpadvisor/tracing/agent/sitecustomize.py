"""Bootstrap of the ddpadvisor trace agent.

Python imports ``sitecustomize`` at start-up from the first folder on ``sys.path`` that has one.
``ddpadvisor trace`` (or a user who wants the agent under their own torchrun/srun) puts this
folder first on ``PYTHONPATH``, so this file runs in every Python process of the job. It does
two things and nothing else:

1. runs the ``sitecustomize`` this one shadows, if any (as auto-instrumentation tools do), so
   a site's own start-up code keeps working;
2. when ``DDPADVISOR_TRACE`` names an output folder, waits for ``torch`` to be imported and then
   installs the hooks of ``ddpadvisor_trace_agent``. Processes that never import torch pay
   nothing; torch is never imported earlier than the program itself imports it.

Only the standard library is used here.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_shadowed_sitecustomize() -> None:
    """Execute the next ``sitecustomize`` on sys.path (the one this file hides)."""
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None or spec.origin == __file__:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken site hook must not be blamed on the agent
        sys.stderr.write(f"ddpadvisor agent: the chained sitecustomize failed: {exc!r}\n")


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Meta-path finder that runs the agent's ``install()`` right after ``torch`` is imported."""

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)  # one shot; also keeps the real lookup below from recursing
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            real_exec(module)
            _install_agent()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _install_agent() -> None:
    try:
        if _HERE not in sys.path:
            sys.path.append(_HERE)
        import ddpadvisor_trace_agent

        ddpadvisor_trace_agent.install()
    except Exception as exc:  # tracing must never stop the user's job
        sys.stderr.write(f"ddpadvisor agent: not installed: {exc!r}\n")


_chain_shadowed_sitecustomize()
if os.environ.get("DDPADVISOR_TRACE"):
    if "torch" in sys.modules:
        _install_agent()
    else:
        sys.meta_path.insert(0, _AfterTorchImport())
