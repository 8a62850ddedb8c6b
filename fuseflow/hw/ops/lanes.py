"""Element-wise block forms of scalar ops (alu, reduce, spacc): prod(block) copies of the scalar op module.

A val port that carries blocks (docs/samml.md, "Blocks") is prod(block) values wide, element i at bits
``[i*W +: W]``; lane i of the wrapper is the scalar op on element i of every blocked val port (a scalar val
port, e.g. an alu's broadcast operand, feeds every lane whole; crd/ref ports feed every lane). The lanes see the
same valid/ready and the same control tokens, and an op's control flow never depends on its values, so they move
in lockstep: the wrapper takes its handshakes from lane 0 and gathers the lanes' values into one block per beat.
A control token's code sits in the low 10 bits of the bus (the other bits 0), so a stop or D is lane 0's.
Timing is therefore the scalar op's exactly (same latency, one firing per cycle).

Softmax across the blocks of a row (docs/samml.md, "Blocks"): the lanes are the output's elements. An alu's
B-vector operand meeting B x B blocks feeds lane (r, c) its element r (a broadcast over the block's rows);
``reduce`` with ``rows`` has B lanes, lane r seeing row r of the input block reduced (:func:`row_reduce`,
combinational in the firing's cycle: ``FixedFormat.row_reduce_array``, a sum exact then saturated once).
"""

import math

from amaranth.hdl import Cat, Const, Module, Mux, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...errors import HardwareError
from ..token import token_layout, token_signature
from ._common import kind_width

__all__ = ["BlockLanes", "LANE_OPS", "row_reduce"]

#: ops with an element-wise block form
LANE_OPS = ("alu", "reduce", "spacc")


def row_reduce(elems, op, fixed):
    """One row of a block reduced (``reduce`` with ``rows``; ``FixedFormat.row_reduce_array``): ``sum`` adds
    the elements exactly (Amaranth's ``+`` widens) and saturates once to the value width; ``max``/``min`` pick
    with comparators. Combinational."""
    if op == "sum":
        total = elems[0]
        for e in elems[1:]:
            total = total + e
        lo, hi = Const(fixed.min_raw, signed(fixed.width)), Const(fixed.max_raw, signed(fixed.width))
        return Mux(total > hi, hi, Mux(total < lo, lo, total))
    pick = {"max": lambda a, b: Mux(a >= b, a, b), "min": lambda a, b: Mux(a <= b, a, b)}[op]
    out = elems[0]
    for e in elems[1:]:
        out = pick(out, e)
    return out


class BlockLanes(wiring.Component):
    """``prod(block)`` lanes of the scalar op module ``cls`` (``fuseflow.hw.ops.MODULES[op]``).

    ``blocks``: ``{"i_<p>"/"o_<p>": block shape}`` of the val ports that carry blocks (all one shape); other
    arguments as :class:`~fuseflow.hw.ops._common.OpComponent`'s. Offers the attributes a kernel top and the
    test harness use (``op_name``, ``params``, ``port_info``, ``memories``, ``inputs()``, ...)."""

    def __init__(self, cls, params=None, *, crd_width=16, fixed=None, any_kind="ref", connected=None,
                 lookahead=False, blocks=None):
        shapes = {tuple(s) for s in (blocks or {}).values() if s}
        outs = [tuple(s) for p, s in (blocks or {}).items() if s and p.startswith("o_")]
        square = {s for s in shapes if len(s) == 2}
        mixed = len(shapes) == 2 and len(square) == 1 and {s for s in shapes if len(s) == 1} == \
            {next(iter(square))[:1]}
        if cls.op_name not in LANE_OPS or not (len(shapes) == 1 or mixed and cls.op_name in ("alu", "reduce")):
            raise HardwareError(f"op {cls.op_name}", "a block form needs one block shape on its val ports (or B x B "
                                                     "blocks and B-vectors: alu, reduce rows), and exists for "
                                                     f"{', '.join(LANE_OPS)} (got {sorted(shapes)})")
        self.rows = cls.op_name == "reduce" and bool((params or {}).get("rows"))
        if self.rows != (cls.op_name == "reduce" and mixed) or mixed and cls.op_name == "alu" and outs != list(square):
            raise HardwareError(f"op {cls.op_name}", f"blocks {dict(blocks)} do not fit the op's rules (docs/samml.md, "
                                                     "\"Blocks\")")
        self.block = outs[0] if outs else max(shapes, key=len)          # the lanes are the output's elements
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
                w, s = kind_width(kind, self.crd_width, self.fixed, self.blocks[name])
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

    def harness_cycles(self):
        """A lane's allowance (:meth:`fuseflow.hw.ops._common.OpComponent.harness_cycles`): the lanes run side by
        side."""
        return self.lanes[0].harness_cycles()

    def outputs(self):
        return self.lanes[0].outputs()

    def peek_ports(self):
        return []

    def third_ports(self):
        return []

    def pop2_ports(self):
        return []

    def after_ports(self):
        return self.lanes[0].after_ports()

    def _lane_view(self, m, name, i, src, dst):
        """Drive lane i's token view ``dst`` from the wrapper's ``src`` (element i of a blocked port)."""
        if name not in self.blocks:
            m.d.comb += Value.cast(dst).eq(Value.cast(src))
            return
        W = self.fixed.width
        shape = self.blocks[name]
        if len(shape) == len(self.block):
            elem = src.data[i * W:(i + 1) * W].as_signed()
        elif len(shape) == 1:                          # a B-vector over B x B lanes: element r to row r's lanes
            r = i // shape[0]
            elem = src.data[r * W:(r + 1) * W].as_signed()
        else:                                          # reduce rows: lane r sees row r reduced
            b = shape[1]
            elem = row_reduce([src.data[(i * b + c) * W:(i * b + c + 1) * W].as_signed() for c in range(b)],
                              self.params["op"], self.fixed)
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
