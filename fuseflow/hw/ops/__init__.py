"""One Amaranth module per registry op (``fuseflow/hw/ops/<op>.py`` beside ``fuseflow/sim/ops/<op>.py``).

``MODULES[op]`` is the op's :class:`~amaranth.lib.wiring.Component` class; construct it with
``MODULES[op](params, crd_width=16, fixed=FixedFormat(...), any_kind="ref"|"val")``.
Port conventions: docs/hardware.md.
"""

import importlib

from ...samml.registry import OPS
from ._common import MemPorts, OpComponent, kind_width

_CLASSES = {
    "root": "Root", "level_scan": "LevelScan", "array": "Array", "repeat_sig": "RepeatSig",
    "repeat": "Repeat", "alu": "Alu", "reduce": "Reduce", "intersect": "Intersect", "union": "Union",
    "crd_drop": "CrdDrop", "level_write": "LevelWrite", "value_write": "ValueWrite",
    "crd_hold": "CrdHold", "spacc": "Spacc", "locate": "Locate", "mask_scan": "MaskScan",
    "crd_mask": "CrdMask", "parallelize": "Parallelize", "serialize": "Serialize", "block_matmul": "BlockMatmul",
}

MODULES = {}
for _name in OPS:
    try:
        _mod = importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _exc:          # pragma: no cover - only while an op is missing
        if _exc.name != f"{__name__}.{_name}":
            raise
        continue
    MODULES[_name] = getattr(_mod, _CLASSES[_name])

__all__ = ["MODULES", "OpComponent", "MemPorts", "kind_width"]
