"""Checking simulated outputs against the dense NumPy evaluation of the program's expression."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..samml.expr import evaluate, parse_statements

if TYPE_CHECKING:
    from ..samml.graph import Program
    from ..tensors.fixed import FixedFormat


def tolerance(mode: str, fixed: FixedFormat | None = None) -> tuple[float, float]:
    """(rtol, atol) used to compare a mode's results with float64 NumPy.

    Float mode differs only by summation order. Fixed mode rounds every product and sum to ``frac`` bits:
    see docs/numbers.md for the bound; the default 32/16 format stays well inside atol = 2**-8 on the suite's
    inputs (values in [-2, 2], fibres of up to a few hundred terms)."""
    if mode == "float":
        return 1e-9, 1e-9
    frac = fixed.frac if fixed is not None else 16
    return 1e-3, 2.0 ** -(frac // 2)


def golden(program: Program, inputs: dict[str, Any]) -> dict[str, Any]:
    """Dense NumPy results of ``program.expr`` for ``inputs`` ({name: array or scipy sparse})."""
    if not program.expr:
        return {}
    return evaluate(parse_statements(program.expr), inputs)


def compare(outputs: dict[str, Any], gold: dict[str, Any], rtol: float, atol: float, limit: int = 5) -> list[str]:
    """List of one-line mismatch descriptions (empty when everything agrees)."""
    problems: list[str] = []
    for name, want in gold.items():
        if name not in outputs:
            continue
        got = np.asarray(outputs[name], dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            problems.append(f"{name}: shape {got.shape} but NumPy gives {want.shape}")
            continue
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            idx = np.argwhere(bad)
            where = ", ".join(f"{name}{tuple(int(i) for i in ix)}: sim {got[tuple(ix)]:.6g} vs numpy "
                              f"{want[tuple(ix)]:.6g}" for ix in idx[:limit])
            more = f" (+{len(idx) - limit} more)" if len(idx) > limit else ""
            problems.append(f"{name}: {len(idx)} of {got.size} entries differ: {where}{more}")
    return problems
