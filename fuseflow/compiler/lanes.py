"""The ``parallel`` schedule as the user gives it: index names and factors (the graph pass is
:mod:`fuseflow.compiler.passes.lanes`).

``parallel i 4`` in a program, ``--parallel i=4`` on the command line and ``parallel={"i": 4}`` in the Python
API all name an index and a factor. A kernel that has a parallelized index runs the sub-tree below it on that many
lanes; several indices of one kernel nest (the inner index's lanes inside every lane of the outer one): which
kernels those are is decided against the kernel plans by :func:`fuseflow.compiler.fusion.resolve_parallel`.
"""

from __future__ import annotations

import re

from ..errors import ProgramError
from .. import limits

__all__ = ["parse_parallel", "check_factor"]


def check_factor(index: str, factor, where: str) -> int:
    """The factor as an int >= 1; ProgramError (one line) for 0, a negative or a non-integer factor."""
    if isinstance(factor, str):
        if not re.fullmatch(r"[+-]?\d+", factor.strip()):
            raise ProgramError(where, f"parallel {index}: the factor must be a positive integer, got {factor!r}")
        factor = int(factor)
    if isinstance(factor, bool) or not isinstance(factor, int):
        if isinstance(factor, float) and factor.is_integer():
            factor = int(factor)
        else:
            raise ProgramError(where, f"parallel {index}: the factor must be a positive integer, got {factor!r}")
    if factor < 1:
        raise ProgramError(where, f"parallel {index}: the factor must be at least 1, got {factor}")
    limits.LANES.check(factor, where)
    return factor


def parse_parallel(spec) -> dict:
    """``"i=4,j=2"`` (or a list of such strings, or a dict) -> {index: factor}."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {str(i): check_factor(i, f, "parallel") for i, f in spec.items()}
    parts = [spec] if isinstance(spec, str) else list(spec)
    out = {}
    for part in parts:
        for item in str(part).split(","):
            item = item.strip()
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\S+)", item)
            if not m:
                raise ProgramError("--parallel", f"expected INDEX=FACTOR (e.g. i=4), got {item!r}")
            if m.group(1) in out:
                raise ProgramError("--parallel", f"index {m.group(1)} is given twice")
            out[m.group(1)] = check_factor(m.group(1), m.group(2), "--parallel")
    return out
