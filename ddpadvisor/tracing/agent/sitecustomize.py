"""Bootstrap of the ddpadvisor trace agent.

Python imports ``sitecustomize`` at start-up from the first folder on ``sys.path`` that has one.
``ddpadvisor trace`` (or a user who wants the agent under their own torchrun/srun) puts this
folder first on ``PYTHONPATH``, so this file runs in every Python process of the job. It does
two things and nothing else:

1. runs the ``sitecustomize`` this one shadows, if any (as auto-instrumentation tools do), so
   a site's own start-up code keeps working;
2. when ``DDPADVISOR_TRACE`` names an output folder, waits for ``torch`` to be imported and then
   installs the hooks of ``ddpadvisor_trace_agent``. Processes that never import torch pay
   nothing; torch is never imported earlier than the program itself imports it, whatever
   imports it (the script, a library, lazily, ``python -m``, a console script such as
   ``torchrun`` or ``accelerate``) and however often it is looked up first without loading.
   The agent records nothing until the process joins a process group, so helper processes
   (launchers, DataLoader workers, compile workers) never write a trace.

Only the standard library is used here.
"""

from __future__ import annotations

import contextlib
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
    """Meta-path finder that makes the loading of ``torch`` run the agent's ``install()`` after it.

    It stays on ``sys.meta_path`` until torch is loaded: a lookup that loads nothing
    (``importlib.util.find_spec("torch")``, which transformers and datasets call before they
    import torch) must not use it up. Each lookup asks the finders behind this one, exactly as
    the import system would, and hands back their spec with the loader's ``exec_module``
    wrapped on that loader instance only.
    """

    def __init__(self) -> None:
        self.looking = False

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname != "torch" or self.looking:
            return None
        self.looking = True
        try:
            spec = None
            for finder in [f for f in sys.meta_path if f is not self]:
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self.looking = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        real_exec = loader.exec_module
        finder = self

        def exec_module(module):  # type: ignore[no-untyped-def]
            with contextlib.suppress(AttributeError):
                del loader.exec_module  # back to the class's own method
            real_exec(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            _install_agent()

        try:
            loader.exec_module = exec_module  # type: ignore[method-assign]
        except (AttributeError, TypeError):  # a loader that takes no attributes: no agent
            return spec
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
