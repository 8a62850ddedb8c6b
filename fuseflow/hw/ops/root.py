"""root: emits reference 0 at its first firing, then D (one token per firing, 2 cycles without stalls)."""

from amaranth.hdl import Module, Signal

from ._common import OpComponent, set_data, set_done


class Root(OpComponent):
    """Ports: ``o_ref``. One-shot: after D it stays idle until reset."""

    op_name = "root"

    def elaborate(self, platform):
        m = Module()
        f = self.fire_logic()
        state = Signal(2)            # 0: emit 0, 1: emit D, 2: finished
        with m.If(state == 0):
            m.d.comb += [f.go.eq(1), f.push["ref"].eq(1)]
            set_data(m, self.o_ref, 0)
        with m.Elif(state == 1):
            m.d.comb += [f.go.eq(1), f.push["ref"].eq(1)]
            set_done(m, self.o_ref)
        with m.If(f.fire):
            m.d.sync += state.eq(state + 1)
        f.build(m)
        return m
