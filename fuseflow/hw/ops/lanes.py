"""Element-wise block forms of scalar ops (alu, reduce, spacc): prod(block) copies of the scalar op module.

A val port that carries blocks (docs/samml.md, "Blocks") is prod(block) values wide, element i at bits
``[i*W +: W]``; lane i of the wrapper is the scalar op on element i of every blocked val port (a scalar val
port, e.g. an alu's broadcast operand, feeds every lane whole; crd/ref ports feed every lane). The lanes see the
same valid/ready and the same control tokens, and an op's control flow never depends on its values, so they move
in lockstep: the wrapper takes its handshakes from lane 0 and gathers the lanes' values into one block per beat.
A control token's code sits in the low 10 bits of the bus (the other bits 0), so a stop or D is lane 0's.
Timing is therefore the scalar op's exactly (same latency, one firing per cycle).
"""

import math

from amaranth.hdl import Cat, Module, Mux, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...errors import HardwareError
from ..token import token_layout, token_signature
from ._common import kind_width

__all__ = ["BlockLanes", "LANE_OPS"]

#: ops with an element-wise block form
LANE_OPS = ("alu", "reduce", "spacc")


class BlockLanes(wiring.Component):
    """``prod(block)`` lanes of the scalar op module ``cls`` (``fuseflow.hw.ops.MODULES[op]``).

    ``blocks``: ``{"i_<p>"/"o_<p>": block shape}`` of the val ports that carry blocks (all one shape); other
    arguments as :class:`~fuseflow.hw.ops._common.OpComponent`'s. Offers the attributes a kernel top and the
    test harness use (``op_name``, ``params``, ``port_info``, ``memories``, ``inputs()``, ...)."""

    def __init__(self, cls, params=None, *, crd_width=16, fixed=None, any_kind="ref", connected=None,
                 lookahead=False, blocks=None):
        shapes = {tuple(s) for s in (blocks or {}).values() if s}
        if cls.op_name not in LANE_OPS or len(shapes) != 1:
            raise HardwareError(f"op {cls.op_name}", "a block form needs one block shape on its val ports, and "
                                                     f"exists for {', '.join(LANE_OPS)} (got {sorted(shapes)})")
        self.block = shapes.pop()
        self.n = math.prod(self.block)
        self.lanes = [cls(params, crd_width=crd_width, fixed=fixed, any_kind=any_kind, connected=connected,
                          lookahead=lookahead) for _ in range(self.n)]
        lane = self.lanes[0]
        if lane.memories or lane.peek_ports():
            raise HardwareError(f"op {cls.op_name}", "lanes of an op with tensor memories or look-ahead views")
        self.op_name, self.spec, self.params = lane.op_name, lane.spec, lane.params
        self.fixed, self.crd_width, self.any_kind = lane.fixed, lane.crd_width, lane.any_kind
        self.connected, self.lookahead, self.lookahead_depth = lane.connected, lane.lookahead, lane.lookahead_depth
        self.memories = {}
        self.blocks = {p: tuple(s) for p, s in (blocks or {}).items() if s}
        self.port_info = {}
        for name, (kind, w, s) in lane.port_info.items():
            if name in self.blocks:
                if kind != "val":
                    raise HardwareError(f"op {self.op_name}", f"port {name} is {kind}: only val ports carry blocks")
                w, s = kind_width(kind, self.crd_width, self.fixed, self.block)
            self.port_info[name] = (kind, w, s)
        members = {}
        for name, member in lane.signature.members.items():
            if name in self.port_info:
                sig = token_signature(self.port_info[name][1])
                members[name] = In(sig) if member.flow == In else Out(sig)
            elif self._viewed(name):
                members[name] = In(token_layout(self.port_info[self._viewed(name)][1]))
            else:
                members[name] = member
        super().__init__(members)

    def _viewed(self, name):
        """The input port whose next-head view member ``name`` is (``i_val_behind``, ``i_val_stay``), or None."""
        for suffix in ("_behind", "_stay"):
            if name.endswith(suffix) and name[:-len(suffix)] in self.port_info:
                return name[:-len(suffix)]
        return None

    def inputs(self):
        return self.lanes[0].inputs()

    def outputs(self):
        return self.lanes[0].outputs()

    def peek_ports(self):
        return []

    def after_ports(self):
        return self.lanes[0].after_ports()

    def _lane_view(self, m, name, i, src, dst):
        """Drive lane i's token view ``dst`` from the wrapper's ``src`` (element i of a blocked port)."""
        if name not in self.blocks:
            m.d.comb += Value.cast(dst).eq(Value.cast(src))
            return
        W = self.fixed.width
        elem = src.data[i * W:(i + 1) * W].as_signed()
        m.d.comb += [dst.data.eq(Mux(src.ctrl, src.data[:10], elem)), dst.ctrl.eq(src.ctrl)]

    def elaborate(self, platform):
        m = Module()
        W = self.fixed.width
        for i, lane in enumerate(self.lanes):
            m.submodules[f"lane{i}"] = lane
        lane0 = self.lanes[0]
        for name, member in self.signature.members.items():
            outer = getattr(self, name)
            if name in self.port_info and member.flow == In:            # an input stream: valid to all lanes
                for i, lane in enumerate(self.lanes):
                    inner = getattr(lane, name)
                    m.d.comb += inner.valid.eq(outer.valid)
                    self._lane_view(m, name, i, outer.payload, inner.payload)
                m.d.comb += outer.ready.eq(getattr(lane0, name).ready)
            elif name in self.port_info:                                # an output stream: gathered
                for lane in self.lanes:
                    m.d.comb += getattr(lane, name).ready.eq(outer.ready)
                first = getattr(lane0, name)
                m.d.comb += [outer.valid.eq(first.valid), outer.payload.ctrl.eq(first.payload.ctrl)]
                if name in self.blocks:
                    vals = Cat(*[getattr(lane, name).payload.data[:W] for lane in self.lanes])
                    m.d.comb += outer.payload.data.eq(Mux(first.payload.ctrl, first.payload.data[:10], vals))
                else:
                    m.d.comb += outer.payload.data.eq(first.payload.data)
            elif self._viewed(name):
                for i, lane in enumerate(self.lanes):
                    self._lane_view(m, self._viewed(name), i, outer, getattr(lane, name))
            elif member.flow == In:
                for lane in self.lanes:
                    m.d.comb += getattr(lane, name).eq(outer)
            else:
                m.d.comb += outer.eq(getattr(lane0, name))
        return m
