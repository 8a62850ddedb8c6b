"""reduce: one value per innermost fibre (sum or max), fuseflow/sim/ops/reduce.py.

Without ``crd`` (one firing per input token, plus one per ``S_n`` (n >= 1) that closes a non-empty fibre):
a value or N (= 0) is accumulated and popped without output; ``S0`` pops and emits the value if the
fibre was non-empty (nothing if empty); ``S_n`` (n >= 1) closing a non-empty fibre emits the value
*without* popping (the next firing sees it again as a bare stop), a bare ``S_n`` emits ``S_(n-1)`` and
pops; D passes.

With ``crd`` (``connected={"val", "crd"}``): the output has crd's structure, each coordinate replaced by
its fibre's value (0 for an empty fibre). A value is accumulated (popping ``val`` only); the value
fibre's stop emits the value and pops both (``closed`` remembers a stop of level >= 1, whose partner
stop on crd is then emitted alone, popping crd only); an outer stop ``S_m`` (with ``S_(m+1)`` on val)
passes and pops both; D passes.
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed

from ...samml.registry import REDUCE_MERGE
from ..token import is_data_or_empty, is_done, is_empty, is_stop, stop_level
from ._common import OpComponent, copy_ctrl, set_data, set_stop
from .alu import fixed_op


class Reduce(OpComponent):
    op_name = "reduce"

    def elaborate(self, platform):
        m = Module()
        fx = self.fixed
        W = fx.width
        f = self.fire_logic()
        v, vv = self.i_val.payload, self.i_val.valid
        out = self.o_val
        acc = Signal(signed(W))
        has = Signal()
        # N counts as 0: the merge on the raw payload and on 0 (constant-folded), selected after the datapath
        # (its carry chain then starts at the payload register, not behind a zeroing multiplexer)
        raw, empty, zero = v.data[:W].as_signed(), is_empty(v), Const(0, signed(W))
        merge = REDUCE_MERGE[self.params["op"]]
        merged = Mux(empty, fixed_op(m, merge, acc, zero, fx, prefix="red"),
                     fixed_op(m, merge, acc, raw, fx, prefix="red"))
        new_acc = Mux(has, merged, Mux(empty, zero, raw))

        if "crd" not in self.inputs():
            m.d.comb += f.go.eq(vv)
            with m.If(is_data_or_empty(v)):
                m.d.comb += f.pop["val"].eq(1)
                with m.If(f.go):                        # nothing pushed: fires when go (shorter enable)
                    m.d.sync += [acc.eq(new_acc), has.eq(1)]
            with m.Elif(is_done(v)):
                m.d.comb += [f.push["val"].eq(1), f.pop["val"].eq(1)]
                copy_ctrl(m, out, v)
            with m.Elif(has):
                m.d.comb += [f.push["val"].eq(1), f.pop["val"].eq(stop_level(v) == 0)]
                set_data(m, out, acc)
                with m.If(f.fire):
                    m.d.sync += has.eq(0)
            with m.Elif(stop_level(v) != 0):
                m.d.comb += [f.push["val"].eq(1), f.pop["val"].eq(1)]
                set_stop(m, out, stop_level(v) - 1)
            with m.Else():
                m.d.comb += f.pop["val"].eq(1)
            f.build(m)
            return m

        c, cv = self.i_crd.payload, self.i_crd.valid
        closed = Signal()
        with m.If(closed & is_stop(c)):
            m.d.comb += [f.go.eq(cv), f.push["val"].eq(1), f.pop["crd"].eq(1)]
            copy_ctrl(m, out, c)
            with m.If(f.fire):
                m.d.sync += closed.eq(0)
        with m.Else():
            m.d.comb += f.go.eq(cv & vv)
            with m.If(~c.ctrl):
                with m.If(is_data_or_empty(v)):
                    m.d.comb += f.pop["val"].eq(1)
                    with m.If(f.go):                    # nothing pushed: fires when go
                        m.d.sync += [acc.eq(new_acc), has.eq(1)]
                with m.Else():
                    m.d.comb += [f.push["val"].eq(1), f.pop["val"].eq(1), f.pop["crd"].eq(1)]
                    set_data(m, out, Mux(has, acc, 0))
                    with m.If(f.fire):
                        m.d.sync += [has.eq(0), closed.eq(stop_level(v) != 0)]
            with m.Else():
                m.d.comb += [f.push["val"].eq(1), f.pop["val"].eq(1), f.pop["crd"].eq(1)]
                copy_ctrl(m, out, c)
        f.build(m)
        return m
