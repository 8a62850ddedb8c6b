"""The ``widths`` graph pass: the coordinate width from shapes and capacities
(:func:`fuseflow.samml.widths.assign_widths`)."""

from __future__ import annotations

from ...samml.widths import assign_widths

__all__ = ["assign_widths"]
