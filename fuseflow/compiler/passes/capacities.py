"""The ``capacities`` graph pass: worst-case or density-based capacities, so hardware builds without data
(:func:`fuseflow.samml.capacities.declare_capacities`)."""

from __future__ import annotations

from ...samml.capacities import declare_capacities

__all__ = ["declare_capacities"]
