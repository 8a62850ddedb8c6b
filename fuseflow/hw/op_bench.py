"""Every op on its emitted Verilog under cocotb: many ops in one Verilator build, each checked against ``run_op``.

:func:`op_bank` puts one :class:`~fuseflow.hw.testing.OpHarness` per case (an op with its parameters, its tensor
memories initialised from them, a :class:`~fuseflow.hw.stream.StreamFIFO` on every port so that look-ahead and
next-head views come from the FIFOs as in a kernel) side by side in one top module, whose ports are each case's
streams (``c<k>_<i|o>_<port>_{valid,ready,payload}``) and, for a writer, its ``done``, entry counts and a
combinational read port per written memory. :func:`run_op_bank` converts it to Verilog (Amaranth -> Yosys), builds
it once with Verilator (cached by Verilog text, :func:`fuseflow.hw.verilator.build_verilator`) and runs the cocotb
test :mod:`fuseflow.hw.op_bench_cocotb` for one seed: every case at once, each port driven from Python with random
valid (inputs) and ready (outputs) stalls; it returns the tokens (and written memories) each case produced.
:func:`expected` is ``run_op``'s fixed-mode answer for the same case; :func:`vary_values` draws each seed's values.

One build serves every op, so the cost is one Verilator compile (cached across runs), not one per op.
"""

import random
from dataclasses import dataclass, field

from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal, Value

from ..samml.registry import get_op, port_kind
from ..tensors.fixed import FixedFormat
from .testing import OpHarness, _mem_params, harness_lookahead, lookahead_input_depth, make_op, written_arrays

#: the cocotb test module (not a pytest module)
BENCH_MODULE = "fuseflow.hw.op_bench_cocotb"
#: the bank's top module name
TOP = "ff_op_bank"


@dataclass
class OpCase:
    """One op instance of the bank: ``op``, its ``params`` (memories included), its input token lists, and the
    kind its polymorphic ports carry (``any_kind``: ``ref`` or ``val``, which sets their width)."""
    name: str
    op: str
    params: dict
    inputs: dict
    any_kind: str = "ref"
    fixed: FixedFormat = field(default_factory=FixedFormat)


class OpBank(Elaboratable):
    """The ops of ``cases`` side by side, each behind FIFOs, with flat top-level ports (see the module doc)."""

    def __init__(self, cases: list, crd_width: int = 16):
        self.cases = cases
        self.harnesses = []
        self.sync = ClockDomain("sync")
        self.ports = [self.sync.clk, self.sync.rst]     # top-level Signals, for verilog.convert
        self.layout = []        # per case: {"inputs": {p: [w, s, kind]}, "outputs": ..., "writes": {...}}
        self._io = []           # per case: [(top signal, harness signal, is_input)]
        for k, c in enumerate(cases):
            dut = make_op(c.op, c.params, crd_width=crd_width, fixed=c.fixed, any_kind=c.any_kind,
                          connected=set(c.inputs),
                          lookahead=harness_lookahead(c.op, fifo_depth(c.op, c.params), c.params))
            init, depth = _mem_params(c.op, dut.params | c.params, c.fixed)
            ntok = sum(len(t) for t in c.inputs.values())
            for array, mp in dut.memories.items():
                if mp.writes:
                    depth[array] = ntok + 2
            h = OpHarness(dut, init, depth, fifo_depth=fifo_depth(c.op, c.params), clock_domain=False)
            self.harnesses.append(h)
            lay = {"inputs": {}, "outputs": {}, "writes": {}}
            io = []
            for side, streams, key in (("i", h.ins, "inputs"), ("o", h.outs, "outputs")):
                for p, stream in streams.items():
                    kind, w, s = dut.port_info[f"{side}_{p}"]
                    # a port carrying blocks: its block shape and value width (the bench packs the elements)
                    block = list(getattr(dut, "blocks", {}).get(f"{side}_{p}", ()))
                    lay[key][p] = [w, bool(s), kind] + ([block, c.fixed.width] if block else [])
                    pre = f"c{k}_{side}_{p}"
                    valid, ready = Signal(name=f"{pre}_valid"), Signal(name=f"{pre}_ready")
                    payload = Signal(len(Value.cast(stream.payload)), name=f"{pre}_payload")
                    self.ports += [valid, ready, payload]
                    if side == "i":
                        io += [(stream.valid, valid), (Value.cast(stream.payload), payload), (ready, stream.ready)]
                    else:
                        io += [(valid, stream.valid), (payload, Value.cast(stream.payload)), (stream.ready, ready)]
            writers = [a for a, mp in dut.memories.items() if mp.writes]
            if writers:
                done = Signal(name=f"c{k}_done")
                self.ports.append(done)
                io.append((done, dut.done))
                for array in writers:
                    mp = dut.memories[array]
                    count = Signal(len(getattr(dut, mp.count)), name=f"c{k}_{array}_count")
                    raddr = Signal(range(max(depth[array], 2)), name=f"c{k}_{array}_raddr")
                    rdata = Signal(mp.width, name=f"c{k}_{array}_rdata")
                    self.ports += [count, raddr, rdata]
                    io.append((count, getattr(dut, mp.count)))
                    rp = h.mems[array].read_port(domain="comb")
                    io += [(rp.addr, raddr), (rdata, rp.data)]
                    lay["writes"][array] = [mp.width, bool(mp.signed)]
            self.layout.append(lay)
            self._io.append(io)

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.sync
        for k, h in enumerate(self.harnesses):
            m.submodules[f"c{k}"] = h
            for dst, src in self._io[k]:
                m.d.comb += dst.eq(src)
        return m


def fifo_depth(op: str, params=None) -> int:
    """The FIFO depth around an op: 2, or its look-ahead depth when larger and it looks ahead at these parameters
    (the FIFOs then feed its look-ahead)."""
    return max(2, lookahead_input_depth(op, params) or 0)


def op_bank_verilog(cases: list) -> tuple:
    """``(verilog text, layout)`` of the bank of ``cases`` (layout: per case, port widths/signedness/kinds)."""
    from amaranth.back import verilog
    bank = OpBank(cases)
    return verilog.convert(bank, name=TOP, ports=bank.ports), bank.layout


def vary_values(case: OpCase, seed: int) -> dict:
    """The inputs of ``case`` with every value token of its value-kind ports redrawn from ``seed`` (the stream
    structure, coordinates and references stay; values that fit memories baked into the Verilog are not changed):
    mostly small values, sometimes the format's extremes, zero and one."""
    if seed == 0:
        return case.inputs
    rng = random.Random(seed * 7919 + hash_name(case.name))
    spec = get_op(case.op)
    fx = case.fixed
    out = {}
    for p, toks in case.inputs.items():
        kind = port_kind(spec, p)
        if (case.any_kind if kind in ("any", "token") else kind) != "val":
            out[p] = list(toks)
            continue
        out[p] = [_draw(rng, fx) if isinstance(t, int) else t for t in toks]
    return out


def hash_name(name: str) -> int:
    return sum((i + 1) * ord(ch) for i, ch in enumerate(name))


def _draw(rng, fx):
    r = rng.random()
    if r < 0.1:
        return rng.choice([fx.min_raw, fx.max_raw, 0, 1, -1, fx.one, -fx.one])
    if r < 0.2:
        return rng.randint(fx.min_raw, fx.max_raw)
    return rng.randint(-8 * fx.one, 8 * fx.one)


def expected(case: OpCase, inputs: dict) -> dict:
    """``run_op``'s fixed-mode outputs of ``case`` on ``inputs`` ({port or written array: tokens or words})."""
    import numpy as np
    from ..sim import run_op
    # block tokens travel the job file as nested lists: NumPy arrays for the op model, lists again for comparing
    ins = {p: [np.asarray(t, dtype=np.int64) if isinstance(t, list) else t for t in toks]
           for p, toks in inputs.items()}
    out = written_arrays(case.op, run_op(case.op, case.params, ins, mode="fixed"))
    return {k: [t.tolist() if hasattr(t, "tolist") else t for t in v] for k, v in out.items()}


def build_op_bank(cases: list, root=None) -> tuple:
    """``(Verilator build directory, layout)`` of the bank of ``cases``: compiled once per Verilog text (Verilator's
    cache, ``$FUSEFLOW_HW_CACHE`` or the user's), its C++ at -O0 (the runs are a few hundred cycles)."""
    from .verilator import build_verilator
    text, layout = op_bank_verilog(cases)
    return build_verilator(text, TOP, root=root, compile_fast=True), layout


def run_op_bank(cases: list, seed: int, *, stall: float = 0.4, max_stall: int = 3, max_cycles: int = 20_000,
                built=None, root=None) -> tuple:
    """Run every case of the bank once on Verilator with seed ``seed``'s values and stalls (``built``: the result
    of :func:`build_op_bank`, to run many seeds on one build).

    Returns ``(got, inputs)``: ``{case name: {port or written array: tokens}}`` (a case that did not finish within
    ``max_cycles`` gets an ``"error"`` entry beside what it produced) and ``{case name: the inputs it ran}``."""
    from .verilator import run_cocotb_job
    bdir, layout = built or build_op_bank(cases, root)
    job_cases = []
    for k, (c, lay) in enumerate(zip(cases, layout)):
        job_cases.append({"name": c.name, "prefix": f"c{k}", "inputs": vary_values(c, seed),
                          "inputs_layout": lay["inputs"], "outputs": lay["outputs"], "writes": lay["writes"]})
    job = {"cases": job_cases, "seed": seed, "stall": stall, "max_stall": max_stall, "max_cycles": max_cycles}
    res = run_cocotb_job(bdir, TOP, BENCH_MODULE, "FUSEFLOW_OPBANK_JOB", job, what="op bench")
    return {name: got for name, got in res["cases"].items()}, {c["name"]: c["inputs"] for c in job_cases}


__all__ = ["OpCase", "OpBank", "op_bank_verilog", "build_op_bank", "run_op_bank", "expected", "vary_values",
           "fifo_depth"]
