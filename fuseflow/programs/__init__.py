"""The example programs in index notation (``*.ff``), shipped with the package.

    from fuseflow import programs
    programs.names()              # ['autoencoder', 'chain3', ...]
    programs.path("gcn2")         # .../fuseflow/programs/gcn2.ff
    programs.directory()

``python -m fuseflow.compiler compile $(python -c 'import fuseflow.programs as p; print(p.path("gcn2"))') -o out``
"""

from __future__ import annotations

import os

from ..errors import FuseFlowError


def directory() -> str:
    """The folder holding the example ``.ff`` programs (inside the installed package)."""
    return os.path.dirname(os.path.abspath(__file__))


def names() -> list:
    """Names of the example programs (file names without ``.ff``), sorted."""
    return sorted(f[:-3] for f in os.listdir(directory()) if f.endswith(".ff"))


def path(name: str) -> str:
    """The file of example program ``name`` (``gcn2`` or ``gcn2.ff``)."""
    base = name[:-3] if name.endswith(".ff") else name
    p = os.path.join(directory(), base + ".ff")
    if not os.path.exists(p):
        raise FuseFlowError(f"program {name}", f"no such example (known: {', '.join(names())})")
    return p
