"""The ``parallel`` schedule: which kernels run on how many lanes (the graph pass is
:mod:`fuseflow.samml.lanes`).

``parallel i 4`` in a program, ``--parallel i=4`` on the command line and ``parallel={"i": 4}`` in the Python
API all name an index and a factor. A kernel that has a parallelized index runs the sub-tree below it on that many
lanes; several indices of one kernel nest (the inner index's lanes inside every lane of the outer one).
"""

from __future__ import annotations

import re

from ..errors import ProgramError
from .. import limits

__all__ = ["parse_parallel", "check_factor", "resolve_parallel"]


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


def resolve_parallel(plans, parallel: dict) -> dict:
    """{kernel name: [{"lanes": factor, "dim": size of the index, "level": its place in the kernel's order, "unit":
    the largest dimension below it}]} for
    the kernel plans (several entries: nested lanes); ProgramError for an index no kernel has or a factor larger
    than the index's dimension."""
    from .fusion import KernelPlan
    out = {}
    kernels = [p for p in plans if isinstance(p, KernelPlan)]
    for index, factor in parallel.items():
        having = [p for p in kernels if index in p.order]
        if not having:
            known = sorted({i for p in kernels for i in p.order})
            raise ProgramError(f"parallel {index}", f"no kernel has index {index} (indices: {', '.join(known)})")
        for p in having:
            size = p.sizes.get(index)
            size = int(size) if size is not None else factor
            if factor > size:
                raise ProgramError(f"parallel {index}", f"factor {factor} is larger than the dimension of {index} "
                                                        f"({size})")
            if factor > 1:
                level = p.order.index(index)
                below = [int(p.sizes[i]) for i in p.order[level + 1:] if p.sizes.get(i) is not None]
                out.setdefault(p.name, []).append({"lanes": factor, "dim": size, "level": level,
                                                   "unit": max(below, default=None)})
    return out
