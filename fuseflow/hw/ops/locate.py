"""locate: coordinates of a fibre -> references ``r*dim + c`` of a dense level (r: the fibre's parent reference).

States (fuseflow/sim/ops/locate.py):

- FRESH (nothing held; inspects the heads of ``ref`` (parent) and ``crd``):
  parent D (crd D) -> emits D, pops both; parent S_m (crd S_(m+1)) -> emits the crd stop, pops both;
  parent r (data or N) with a coordinate c -> emits r*dim + c (N for N), pops both, holds r (HELD);
  with a stop -> pops the parent alone, no output (an empty fibre), HELD.
- HELD (inspects ``crd``; for a stop S_n with n >= 1 also the parent): c -> emits held*dim + c, pops crd;
  S0 -> emits S0, pops crd, FRESH; S_n (n >= 1) -> emits S_n, pops crd and the parent's S_(n-1), FRESH.

No memory: the held reference is kept as ``held*dim`` (one constant multiply when it is taken).
"""

from amaranth.hdl import Module, Signal

from ...errors import HardwareError
from ..token import is_done, is_empty, is_stop, stop_level
from ._common import OpComponent, copy_ctrl, set_data, set_empty

FRESH, HELD = 0, 1


class Locate(OpComponent):
    op_name = "locate"

    def _add_members(self, members):
        dim = self.params.get("dim")
        if not isinstance(dim, int) or dim < 0:
            raise HardwareError("op locate", f"'dim' must be a non-negative integer, got {dim!r}")
        self.dim = dim

    def elaborate(self, platform):
        m = Module()
        w = self.crd_width
        f = self.fire_logic()
        p, pv = self.i_ref.payload, self.i_ref.valid
        c, cv = self.i_crd.payload, self.i_crd.valid
        out = self.o_ref
        state = Signal(range(2))
        base = Signal(w)             # held reference * dim
        held_empty = Signal()        # the held parent reference is N
        p_base = Signal(w)
        m.d.comb += p_base.eq(p.data[:w] * self.dim)
        c_is_data = ~c.ctrl

        with m.Switch(state):
            with m.Case(FRESH):
                m.d.comb += f.go.eq(pv & cv)
                with m.If(is_done(p) | is_stop(p)):
                    m.d.comb += [f.push["ref"].eq(1), f.pop["ref"].eq(1), f.pop["crd"].eq(1)]
                    copy_ctrl(m, out, c)
                with m.Elif(c_is_data):
                    m.d.comb += [f.push["ref"].eq(1), f.pop["ref"].eq(1), f.pop["crd"].eq(1)]
                    with m.If(is_empty(p)):
                        set_empty(m, out)
                    with m.Else():
                        set_data(m, out, p_base + c.data[:w])
                    with m.If(f.fire):
                        m.d.sync += [base.eq(p_base), held_empty.eq(is_empty(p)), state.eq(HELD)]
                with m.Else():
                    m.d.comb += f.pop["ref"].eq(1)
                    with m.If(f.fire):
                        m.d.sync += [base.eq(p_base), held_empty.eq(is_empty(p)), state.eq(HELD)]
            with m.Case(HELD):
                with m.If(c_is_data):
                    m.d.comb += [f.go.eq(cv), f.push["ref"].eq(1), f.pop["crd"].eq(1)]
                    with m.If(held_empty):
                        set_empty(m, out)
                    with m.Else():
                        set_data(m, out, base + c.data[:w])
                with m.Else():
                    promote = stop_level(c) != 0
                    m.d.comb += [f.go.eq(cv & (pv | ~promote)), f.push["ref"].eq(1), f.pop["crd"].eq(1),
                                 f.pop["ref"].eq(promote)]
                    copy_ctrl(m, out, c)
                    with m.If(f.fire):
                        m.d.sync += state.eq(FRESH)
        f.build(m)
        return m
