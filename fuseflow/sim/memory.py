"""Off-chip memory: where tensors and materialised intermediates live, and what reaching them costs.

The op models keep the on-chip timing contract (docs/samml.md: memories read combinationally); a
:class:`MemorySystem` then charges each kernel for the bytes its memory-backed ops (registry ``memory="read"``
or ``"write"``) moved, through one port of ``bytes_per_cycle`` shared by every reader and writer of the kernel,
and for ``latency`` once per dependent memory stage on the kernel's longest chain of such ops (a streaming,
prefetching pipeline pays a round trip per level of indirection to fill, not per access)::

    cycles(kernel) = max(compute, ceil(bytes / bytes_per_cycle)) + latency * memory_stages

``onchip`` (no transfer limit, no latency) gives exactly the op-level cycles: the RTL's contract and the
default. What this leaves out (docs/evaluation.md): row-buffer hits and misses, banks and their conflicts,
refresh, read/write turnarounds, and the back-pressure a slow memory puts on individual ops (the charge is at
kernel granularity, so a kernel whose compute and traffic are both bursty is under-charged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

from ..errors import FuseFlowError
from ..samml.registry import OPS


@dataclass(frozen=True)
class MemorySystem:
    """A memory port: ``bytes_per_cycle`` (None: unlimited) and ``latency`` cycles per round trip."""
    name: str
    bytes_per_cycle: float | None = None
    latency: int = 0

    def kernel_cycles(self, compute: int, moved_bytes: int, stages: int) -> dict:
        """The kernel's cycles under this memory, with the parts that made them."""
        transfer = 0 if self.bytes_per_cycle is None else math.ceil(moved_bytes / self.bytes_per_cycle)
        wait = self.latency * stages if moved_bytes else 0
        return {"compute": compute, "transfer": transfer, "latency": wait, "stages": stages,
                "cycles": max(compute, transfer) + wait}


#: Presets at a 1 GHz accelerator clock (sources and derivations in docs/evaluation.md "Memory model").
PRESETS = {
    # today's behaviour: memories on chip, read combinationally (the RTL's contract)
    "onchip": MemorySystem("onchip", None, 0),
    # one HBM2 channel: 128 bits x 2.0 Gb/s per pin = 32 GB/s (JESD235A); ~100 ns loaded read latency
    "hbm2": MemorySystem("hbm2", 32.0, 100),
    # one DDR4-2400 channel: 64 bits x 2.4 GT/s = 19.2 GB/s (JESD79-4); ~80 ns idle read latency
    "ddr4": MemorySystem("ddr4", 19.2, 80),
}


def memory_system(spec: "str | MemorySystem | None") -> MemorySystem:
    """A preset name, ``bw=B,latency=L`` (bytes per cycle, cycles), or a MemorySystem."""
    if spec is None:
        return PRESETS["onchip"]
    if isinstance(spec, MemorySystem):
        return spec
    if spec in PRESETS:
        return PRESETS[spec]
    if "=" in spec:
        fields = {}
        for part in spec.split(","):
            key, _, value = part.partition("=")
            try:
                fields[key.strip()] = float(value)
            except ValueError:
                raise FuseFlowError("--memory", f"{part!r} is not key=number") from None
        unknown = set(fields) - {"bw", "latency"}
        if unknown or "bw" not in fields:
            raise FuseFlowError("--memory", "expected bw=BYTES_PER_CYCLE[,latency=CYCLES]")
        if fields["bw"] <= 0 or fields.get("latency", 0) < 0:
            raise FuseFlowError("--memory", "bandwidth must be > 0 and latency >= 0")
        return MemorySystem(spec, fields["bw"], int(fields.get("latency", 0)))
    raise FuseFlowError("--memory", f"unknown memory {spec!r} (presets: {', '.join(PRESETS)}; "
                                    "or bw=BYTES_PER_CYCLE,latency=CYCLES)")


def memory_stages(kernel, moved=None) -> int:
    """Memory-backed ops on the kernel's longest path (each a dependent round trip to fill the pipeline).

    ``moved``: the node ids that actually moved bytes (a dense level scan is memory-backed but reads
    nothing); by default every op the registry marks ``memory``.
    """
    g = kernel.graph()
    depth = {}
    for n in nx.topological_sort(g):
        spec = OPS.get(kernel.nodes[n].op)
        own = 1 if spec is not None and spec.memory and (moved is None or n in moved) else 0
        depth[n] = own + max((depth[p] for p in g.predecessors(n)), default=0)
    return max(depth.values(), default=0)


def recharge(stats: dict, memory) -> int:
    """A simulated program's cycles under another memory, from its per-kernel counters (no new simulation)."""
    mem = memory_system(memory)
    total = 0
    for ks in stats["kernels"]:
        m = ks["memory"]
        total += mem.kernel_cycles(m["compute"], m["read_bytes"] + m["write_bytes"], m["stages"])["cycles"]
    return total
