"""block_matmul: out = a @ b per token (a B x B block times a B x B block or a B-vector), one output row per cycle.

Ports: ``a`` (B*B*W bits), ``b`` (B*B*W or B*W bits), ``out`` (as ``b``); element (r, c) of a block at bits
``[(r*B + c)*W +: W]`` (docs/samml.md, "Blocks"). N counts as a zero block; a stop or D on ``a`` (``b`` must hold
the same) passes through.

Datapath (:func:`block_rows`): B*B multipliers for a matrix right-hand side (B for a vector), each the alu's
:func:`~fuseflow.hw.ops.alu.pipelined_mul` (4 stages: operands, 18x18 partial products, cross sums, sum), then
ceil(log2 B) adder-tree stages and one stage that shifts and saturates: ``FixedFormat.matmul_array``'s rule
(every product exact, summed exactly, rounded once as ``mul``; the rounding half is added to one product). The
stages are free running; output row r of a firing at cycle t enters the multipliers at t + r (row 0 from the
input heads, the later rows from registers that hold the operands), so row B-1 leaves the last stage at
t + B - 1 + 5 + ceil(log2 B) = t + op_latency - 1; rows 0 .. B-2 wait in a shift register beside it. The
multipliers' operands are chosen by a register (rows pending or not), not by the firing decision.

Firing: the op fires when both heads are there, fewer than ``op_latency`` tokens are in flight and the previous
firing's interval is over (``op_interval`` = B cycles after a data or N firing, 1 after a stop or D); the
output side is the alu's (a valid bit and the control token beside the stages, a skid FIFO of ``op_latency``
tokens for a refused output).
"""

import math

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed

from ...errors import HardwareError
from ...samml.registry import op_interval, op_latency
from ..token import is_empty
from ._common import OpComponent
from ._cells import dsp_family
from ._pipe import Pipe
from .alu import pipelined_mul, pipelined_output, saturate

__all__ = ["BlockMatmul", "block_rows", "block_row_stages", "block_matmul_dsps", "MULT18X18D_BUDGET"]

#: the multipliers of the target board's FPGA (ECP5-85F: 156 MULT18X18D); a block_matmul needing more is refused
MULT18X18D_BUDGET = 156


def block_matmul_dsps(block: int, vector: bool, fixed) -> int:
    """MULT18X18D blocks of one block_matmul: B (vector) or B * B (matrix) products of ``fixed.width``-bit values,
    each 1 (W <= 18) or 4 partial products (W <= 35; wider products are fabric multipliers: ``pipelined_mul``)."""
    per = 1 if fixed.width <= 18 else (4 if fixed.width <= 35 else 0)
    return (block if vector else block * block) * per


def block_row_stages(block: int) -> int:
    """Pipeline stages of one output row: the multiply (4), ceil(log2 B) adder levels, round and saturate (1)."""
    return 4 + math.ceil(math.log2(block)) + 1


def block_rows(m, row_a, rhs, fixed, block, vector, dsp=None, prefix="bmm", rhs_en=None):
    """One output row per cycle: ``row_a`` (B signed(W) values, row r of a) times ``rhs`` (B x B values as a
    list of rows, or B values for a vector). Returns the row's B (or 1) signed(W) results, valid
    :func:`block_row_stages` cycles after the operands (free-running stages). ``rhs_en``: the multipliers'
    ``rhs`` operand registers load only when it is 1, else keep the last ``rhs``."""
    F = fixed.frac
    half = (1 << (F - 1)) if F else 0
    cols = 1 if vector else block
    out = []
    for j in range(cols):
        terms = []
        for k in range(block):
            bkj = rhs[k] if vector else rhs[k][j]
            P = Pipe(m, f"{prefix}_m{j}_{k}", dsp=dsp)
            terms.append(pipelined_mul(P, row_a[k], bkj, half if k == 0 else 0, b_en=rhs_en))
        T = Pipe(m, f"{prefix}_t{j}")
        while len(terms) > 1:               # one adder level per stage (exact: one bit wider per level)
            pairs = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
            if len(terms) % 2:
                pairs.append(terms[-1])
            terms = list(T.stage_tuple(*pairs))
        res = T.stage(saturate(terms[0] >> F, fixed))
        out.append(res)
    return out


def _max_block(vector, fixed):
    b = 1
    while block_matmul_dsps(b + 1, vector, fixed) <= MULT18X18D_BUDGET:
        b += 1
    return b


class BlockMatmul(OpComponent):
    op_name = "block_matmul"

    def _port_blocks(self, blocks):
        n = int(self.params["block"])
        rhs = (n, n) if self.params.get("rhs", "matrix") == "matrix" else (n,)
        dsps = block_matmul_dsps(n, len(rhs) == 1, self.fixed)
        if dsps > MULT18X18D_BUDGET:
            self._MustUse__silence = True
            raise HardwareError(f"op {self.op_name}", f"block {n} ({self.params.get('rhs', 'matrix')} rhs) needs "
                                                      f"{dsps} MULT18X18D for {self.fixed.width}-bit values, the "
                                                      f"ECP5-85F has {MULT18X18D_BUDGET}: the RTL supports B <= "
                                                      f"{_max_block(len(rhs) == 1, self.fixed)} at this width")
        derived = {"i_a": (n, n), "i_b": rhs, "o_out": rhs}
        for port, shape in blocks.items():
            if tuple(shape) != derived.get(port):
                self._MustUse__silence = True
                raise HardwareError(f"op {self.op_name}", f"port {port} carries {list(shape)}, expected "
                                                          f"{list(derived.get(port, ()))} (block {n})")
        return derived

    def elaborate(self, platform):
        m = Module()
        fx = self.fixed
        W = fx.width
        n = int(self.params["block"])
        vector = self.params.get("rhs", "matrix") == "vector"
        latency = op_latency(self.op_name, self.params, fx)
        interval = op_interval(self.op_name, self.params)
        if latency != n + block_row_stages(n):
            raise HardwareError(f"op {self.op_name}", f"datapath takes {n + block_row_stages(n)} cycles, the "
                                                      f"registry says latency {latency}")
        a, b = self.i_a.payload, self.i_b.payload
        row_bits = n * W
        a_bits, b_bits = n * n * W, (n if vector else n * n) * W
        # operands: N is a zero block
        a_in = Mux(a.ctrl, 0, a.data[:a_bits])
        b_in = Mux(b.ctrl, 0, b.data[:b_bits])
        fire = Signal()
        # the interval: ``wait`` cycles left of the last data firing (its rows 1 .. B-1 enter while wait != 0)
        wait = Signal(range(max(interval, 2)))
        # ``idle`` = (wait == 0), a register of its own: it drives the enables of the hold register and of the
        # multipliers' rhs operand registers and the row choice, so the firing logic (heads, in-flight count)
        # stays off those high-fan-out nets
        idle = Signal(init=1)
        a_hold = Signal(max(a_bits - row_bits, 1))       # rows 1 .. B-1 of the firing's a, shifted down a row a cycle
        # the hold loads the head in every idle cycle (a firing's in its cycle: the rows are read only while
        # wait != 0, which only a data firing in an idle cycle starts) and shifts while rows are pending
        with m.If(idle):
            m.d.sync += a_hold.eq(a_in >> row_bits)
        with m.Else():
            m.d.sync += a_hold.eq(a_hold >> row_bits)
        # the multipliers take the held rows while a firing's rows are pending, else the input heads (row 0 of
        # a firing in this cycle; junk, never used, when none fires). b needs no hold: the multipliers' b
        # operand registers (the MULT18X18D's own, with a clock enable) load the head only while idle and keep
        # the firing's b for its later rows
        row = Signal(row_bits)
        rhs_bus = Signal(b_bits)
        m.d.comb += [row.eq(Mux(idle, a_in, a_hold)), rhs_bus.eq(b_in)]

        def elem(bus, i):
            return bus[i * W:(i + 1) * W].as_signed()
        row_a = [elem(row, k) for k in range(n)]
        rhs = [elem(rhs_bus, k) for k in range(n)] if vector else \
            [[elem(rhs_bus, k * n + j) for j in range(n)] for k in range(n)]
        res = block_rows(m, row_a, rhs, fx, n, vector, dsp_family(platform), rhs_en=idle)
        last_row = Cat(*res)
        if n > 1:                               # rows 0 .. B-2 of the block leaving now: the last B-1 rows out
            done_rows = Signal(len(last_row) * (n - 1))
            m.d.sync += done_rows.eq(Cat(done_rows[len(last_row):], last_row))
            block_out = Cat(done_rows, last_row)
        else:
            block_out = last_row

        # firing: both heads, room in the pipeline, the interval over
        is_ctrl = a.ctrl & ~is_empty(a)
        go = Signal()
        m.d.comb += go.eq(self.i_a.valid & self.i_b.valid & (wait == 0))
        with m.If(fire & ~is_ctrl):
            m.d.sync += [wait.eq(interval - 1), idle.eq(interval == 1)]
        with m.Elif(wait != 0):
            m.d.sync += [wait.eq(wait - 1), idle.eq(wait == 1)]
        # the alu's output side, with this op's firing (the interval counts it)
        pipelined_output(self, m, go, is_ctrl, a.data[0:10], block_out, latency, True, fire=fire)
        return m
