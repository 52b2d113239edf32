"""Where the data that ships with ddpadvisor lies (``kb/``, ``probes/``), and the probe list.

Installed from a wheel the folders sit in ``ddpadvisor/_bundled``; in a source checkout they
are beside the package.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path


def bundled_dir(name: str) -> Path:
    """The bundled ``kb`` or ``probes`` folder: inside the wheel, or the source tree."""
    here = Path(__file__).resolve().parent
    installed = here / "_bundled" / name
    if installed.is_dir():
        return installed
    return here.parent / name


@cache
def probe_catalog() -> dict[str, str]:
    """Probe name -> one-line summary, in run order, from ``probes/catalog.json``."""
    data = json.loads((bundled_dir("probes") / "catalog.json").read_text(encoding="utf-8"))
    return {entry["name"]: entry["summary"] for entry in data["probes"]}
