"""Kernel top in the Amaranth simulator: whole programs, outputs bit-identical to the fixed-mode reference
simulator, RTL cycles equal to the simulator's, host-port reuse, multi-kernel programs, capacities, errors."""

import json

import numpy as np
import pytest
from amaranth.hdl import Module

from fuseflow.errors import GraphError, HardwareError, TensorError
from fuseflow.hw.elaborate import build, run_amaranth
from fuseflow.hw.ops import MODULES
from fuseflow.hw.ops._common import OpComponent
from fuseflow.hw.top import compare_tensors, default_factory, op_params
from fuseflow.samml import Program, kernels
from fuseflow.tensors.fixed import FixedFormat


def factory(program, kernel, node):
    return default_factory(program, kernel, node)


def need_ops(program):
    missing = {n.op for k in program.kernels for n in k.nodes.values()} - set(MODULES)
    if missing:
        pytest.skip(f"no RTL yet for {', '.join(sorted(missing))}")


# --- programs ------------------------------------------------------------------------------------------

def copy_program(n=8, capacity=None, depth=None, kernels_=1):
    """x = c for a sparse vector c; with kernels_=2 through an intermediate t (two kernels)."""
    p = Program("copy" if kernels_ == 1 else "copy2")
    p.tensor("c", "input", [n], ["compressed"], capacity=capacity)
    names = ["c", "t", "x"] if kernels_ == 2 else ["c", "x"]
    if kernels_ == 2:
        p.tensor("t", "intermediate", [n], ["compressed"], capacity=capacity)
    p.tensor("x", "output", [n], ["compressed"], capacity=capacity)
    for src, dst in zip(names, names[1:]):
        k = p.kernel(f"copy_{src}_{dst}")
        r = k.add("root", id=f"root_{src}")
        s = k.add("level_scan", {"ref": r["ref"]}, id=f"scan_{src}", tensor=src, level=0, format="compressed")
        a = k.add("array", {"ref": s["ref"]}, id=f"vals_{src}", tensor=src)
        k.add("level_write", {"crd": s["crd"]}, id=f"write_{dst}0", tensor=dst, level=0, format="compressed")
        k.add("value_write", {"val": a["val"]}, id=f"write_{dst}_vals", tensor=dst)
        if depth is not None:
            for st in k.streams.values():
                st.depth = depth
    return p.validate()


def check(b, res):
    assert res["done"], res
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in b.program.kernels] == list(b.reference.kernel_cycles)
    assert res["cycles"] == b.reference.cycles
    assert res["overflow"] == 0


VEC = np.array([0, 1.5, 0, -2, 0, 0, 3.25, 0])


@pytest.mark.parametrize("depth", [None, 1, 3])
def test_copy_kernel_matches_simulator(depth):
    p = copy_program(depth=depth)
    need_ops(p)
    b = build(p, {"c": VEC}, op_factory=factory)
    res = run_amaranth(b, max_cycles=1000)
    check(b, res)
    assert res["counts"]["copy_c_x.write_x_vals.count"] == 3


def test_baked_inputs_need_no_host_loading():
    p = copy_program()
    need_ops(p)
    b = build(p, {"c": VEC}, op_factory=factory, bake=True)
    res = run_amaranth(b, images={}, max_cycles=1000)
    check(b, res)


def test_one_build_serves_any_data_within_capacity():
    p = copy_program(n=8, capacity=[6, 6])
    need_ops(p)
    b = build(p, op_factory=factory)           # sized from the graph: no data needed
    from fuseflow.hw.elaborate import check_inputs_fit, reference_run
    for data in (VEC, np.array([1.0, 2, 3, 4, 5, 6, 0, 0]), np.zeros(8)):
        ref = reference_run(p, {"c": data})
        images = check_inputs_fit(b, {"c": data})
        b.reference = ref
        # the same elaborated top, run again: each run reloads through the host port
        res = run_amaranth(b, images=images, max_cycles=1000)
        check(b, res)
    with pytest.raises((HardwareError, TensorError), match="capacity"):
        check_inputs_fit(b, {"c": np.arange(1.0, 9.0)})


def test_a_write_past_a_memory_capacity_flags_overflow():
    """A writer that reaches past its memory's capacity at run time sets that memory's overflow bit, one bit per
    memory, and the entries below the capacity are still written (the capacity is cut after the build, so the
    data checks before the run pass)."""
    p = copy_program(n=8, capacity=[6, 6])
    need_ops(p)
    b = build(p, {"c": VEC}, op_factory=factory)
    spec = b.plan.memory("x", 0, "crd")
    spec.capacity = 2                           # VEC has 3 nonzeros
    res = run_amaranth(b, max_cycles=1000)
    assert res["done"] and res["overflow"] == 1 << spec.sel
    want = b.reference.tensors["x"]
    assert res["tensors"]["x"]["levels"][0]["crd"] == list(want.levels[0].crd[:2])
    assert res["tensors"]["x"]["vals"] == list(want.vals[:2])     # read back as far as the crd holds


def test_two_kernels_pass_an_intermediate_through_memory():
    p = copy_program(kernels_=2)
    need_ops(p)
    b = build(p, {"c": VEC}, op_factory=factory)
    res = run_amaranth(b, max_cycles=1000)
    check(b, res)
    assert len(res["kernel_cycles"]) == 2
    assert set(b.reference.tensors) == {"t", "x"}


def test_restart_runs_again_from_reset_state():
    """Two runs on one simulator instance (start pulsed twice) give the same results."""
    from amaranth.sim import Simulator

    from fuseflow.hw.elaborate import AmaranthDriver
    from fuseflow.hw.top import host_run
    p = copy_program()
    need_ops(p)
    b = build(p, {"c": VEC}, op_factory=factory)
    man = b.manifest()
    out = []

    async def bench(ctx):
        drv = AmaranthDriver(ctx, b.top)
        out.append(await host_run(drv, man, b.images, 1000))
        out.append(await host_run(drv, man, {}, 1000))

    sim = Simulator(b.top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for res in out:
        check(b, res)


def test_capacity_errors():
    p = copy_program()
    with pytest.raises(HardwareError, match="no capacity"):
        build(p, op_factory=factory)
    p = copy_program(capacity=[2, 2])
    with pytest.raises((HardwareError, TensorError), match="capacity is 2"):
        build(p, {"c": VEC}, op_factory=factory)
    # validation applies the same width rule as the build, with the same message
    with pytest.raises((HardwareError, GraphError), match="need a 24-bit coordinate width, the graph declares "
                                                          "crd_width 16"):
        build(copy_program(n=8, capacity=[70000, 70000]), op_factory=factory)


def test_manifest_describes_ports_memories_and_registers():
    p = copy_program()
    need_ops(p)
    b = build(p, {"c": VEC}, op_factory=factory)
    man = json.loads(json.dumps(b.manifest()))
    b.top._MustUse__silence = True          # only the manifest is wanted here
    ports = {pt["name"]: pt for pt in man["ports"]}
    for name in ("clk", "rst", "start", "busy", "done", "cycles", "host_sel", "host_addr", "host_wdata",
                 "host_we", "host_rdata"):
        assert name in ports
    mems = {m_["name"]: m_ for m_ in man["host"]["memories"]}
    assert set(mems) == {"c.0.seg", "c.0.crd", "c.0.first", "c.vals", "x.0.seg", "x.0.crd", "x.0.first", "x.vals"}
    assert mems["c.vals"]["width"] == 32 and mems["c.vals"]["signed"]
    assert mems["c.0.seg"]["depth"] == 2 and mems["c.0.crd"]["depth"] == 3
    # one fibre at level 0; its first coordinate, a single-coordinate flag and an empty flag
    assert mems["c.0.first"]["depth"] == 1 and mems["c.0.first"]["width"] == mems["c.0.crd"]["width"] + 2
    regs = [r["name"] for r in man["host"]["registers"]]
    assert regs[:3] == ["status", "cycles", "wall_cycles"]
    assert len(man["channels"]) == 4


class _NeverDone(OpComponent):
    """A broken value_write that never takes its input: the run must stop on the watchdog, not hang."""
    op_name = "value_write"

    def _add_members(self, members):
        self._add_write(members, "vals", "vals", self.fixed.width, "vals_count", signed=True)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i_val.ready.eq(0)
        return m


def test_stuck_run_names_where_it_stopped():
    from fuseflow.hw.top import stuck_report
    p = copy_program()
    need_ops(p)

    def broken(program, kernel, node):
        if node.op == "value_write":
            v = program.config["value"]
            return _NeverDone(op_params(program, node), fixed=FixedFormat(v["width"], v["frac"]))
        return factory(program, kernel, node)

    b = build(p, {"c": VEC}, op_factory=broken)
    res = run_amaranth(b, max_cycles=200)
    assert not res["done"]
    msg = stuck_report(b.manifest(), res, 200)
    assert "done never rose within 200 cycles" in msg
    assert "vals_c.val -> write_x_vals.val holds 2 token(s)" in msg
    assert "kernel copy_c_x: last firing in cycle" in msg and "popped)" in msg


# --- the classic suite, where every op has RTL ------------------------------------------------------------

SMALL = ["vector_add", "vector_mul", "spmv_csr", "spmv_dcsr", "elementwise_add", "elementwise_mul", "residual",
         "sddmm", "ttv", "spmspm_inner", "spmspm_gustavson", "spmspm_outer"]


@pytest.mark.parametrize("name", SMALL)
def test_suite_kernel_matches_simulator(name):
    p = kernels.build(name)
    need_ops(p)
    inputs = kernels.random_inputs(p, density=0.5, seed=3)
    b = build(p, inputs, op_factory=factory)
    res = run_amaranth(b, max_cycles=20 * b.reference.cycles + 1000)
    check(b, res)


@pytest.mark.parametrize("name", ["spmv_csr", "spmspm_gustavson", "elementwise_add", "elementwise unfused"])
def test_finish_flags_equal_a_flag_set_by_the_pop_of_done(name):
    """Each channel's finish flag (the producer pushed D and the FIFO is empty again) equals, in every cycle, a
    flag set by the consumer's pop of D: the definition of docs/hardware.md ("Finish"). The kernel totals alone
    do not show an early flag (a writer's own done usually finishes a kernel last)."""
    from amaranth.sim import Simulator

    from fuseflow.hw.elaborate import AmaranthDriver
    from fuseflow.hw.token import is_done
    from fuseflow.hw.top import host_run
    if name == "elementwise unfused":                 # three kernels, through intermediates
        p = compiled("elementwise", "none")
        inputs = kernels.random_inputs(p, density=0.4, seed=1)
    else:
        p = kernels.build(name)
        inputs = kernels.random_inputs(p, density=0.5, seed=3)
    b = build(p, inputs, op_factory=factory)
    sim = Simulator(b.top)                             # elaborates the top: the handles exist from here
    handles = b.top.finish_handles
    assert len(handles) == sum(len(s.dsts) for k in p.kernels for s in k.streams.values())
    sim.add_clock(1e-8)
    result, mismatches = {}, []
    raised = [False] * len(handles)

    async def bench(ctx):
        result.update(await host_run(AmaranthDriver(ctx, b.top), b.manifest(), b.images, 20 * b.reference.cycles
                                     + 1000))

    async def monitor(ctx):
        popped = [False] * len(handles)
        sigs = [x for q, port, seen, en in handles for x in (q.r.valid & port.ready & is_done(q.r.payload),
                                                               seen, en)]
        cycle = 0
        async for _clk, _rst, *vals in ctx.tick().sample(*sigs):
            for i in range(len(handles)):
                pop_done, seen, en = vals[3 * i:3 * i + 3]
                if not en:                       # the kernel held in reset: its flags clear
                    popped[i] = False
                    continue
                if bool(seen) != popped[i]:
                    mismatches.append((cycle, i, bool(seen), popped[i]))
                popped[i] = popped[i] or bool(pop_done)
                raised[i] = raised[i] or popped[i]
            cycle += 1

    sim.add_testbench(bench)
    sim.add_process(monitor)
    sim.run()
    check(b, result)
    assert mismatches == []
    assert all(raised)


# --- intersect look-ahead: channels of depth >= 3 into every intersect ------------------------------------

def deepen_intersect_inputs(program, depth=3):
    """Give every stream into an intersect ``depth`` slots (the look-ahead needs 3; the graph builder already
    gives 3 at arity 2, the registry's input_depth_for; ``depth=None`` falls back to the default of 2)."""
    for k in program.kernels:
        for nid, node in k.nodes.items():
            if node.op == "intersect":
                for pname, _ in node.spec.input_ports(node.params):
                    k.driver(nid, pname).depth = depth
    return program


@pytest.mark.parametrize("name", ["vector_mul", "spmv_csr", "elementwise_mul", "ttv", "spmspm_inner"])
def test_intersect_lookahead_kernel_matches_simulator(name):
    from fuseflow.hw.elaborate import reference_run
    p = deepen_intersect_inputs(kernels.build(name))
    need_ops(p)
    inputs = kernels.random_inputs(p, density=0.5, seed=3)
    b = build(p, inputs, op_factory=factory)
    joins = [op for ops in b.top.ops for op in ops.values() if op.op_name == "intersect"]
    assert joins and all(op.peek_ports() for op in joins)
    res = run_amaranth(b, max_cycles=20 * b.reference.cycles + 1000)
    check(b, res)
    # the channels into an intersect: PeekFIFOs, the references' payloads read from the storage (passed on
    # only), the coordinates' held in registers (compared)
    from fuseflow.hw.stream import PeekFIFO
    kinds = {}
    for ch, q, _layout, _en in b.top.fifo_handles:
        node, port = ch.dst.split(".")
        if any(k.nodes[node].op == "intersect" for k in p.kernels if node in k.nodes):
            assert isinstance(q, PeekFIFO)
            kinds[port[:3]] = kinds.get(port[:3], set()) | {q.held}
    assert kinds == {"crd": {True}, "ref": {False}}


def test_intersect_lookahead_saves_cycles_in_rtl():
    """spmv_csr (n=16, density 0.3): the RTL with depth-3 channels into the intersect matches the simulator and
    takes fewer cycles than the design with depth-2 channels (no look-ahead)."""
    from fuseflow.hw.elaborate import reference_run
    p = deepen_intersect_inputs(kernels.build("spmv_csr", 16))
    inputs = kernels.random_inputs(p, density=0.3, seed=0)
    b = build(p, inputs, op_factory=factory)
    res = run_amaranth(b, max_cycles=20 * b.reference.cycles + 1000)
    check(b, res)
    shallow = reference_run(deepen_intersect_inputs(kernels.build("spmv_csr", 16), None), inputs)
    assert res["cycles"] < 0.9 * shallow.cycles


def vector_mul3(n):
    """x(i) = a(i) * b(i) * c(i) on sparse vectors: one intersect of arity 3."""
    p, b = kernels._program("vector_mul3", "x(i) = a(i) * b(i) * c(i)",
                            [(t, [n], ["compressed"]) for t in "abc"], ("x", [n], None))
    ci, (ra, rb, rc) = b.join("intersect", [b.scan(t, 0, b.root(t)) for t in "abc"], "i")
    ab = b.alu("mul", b.vals("a", ra), b.vals("b", rb), "mul_ab")
    b.write("x", [ci], b.alu("mul", ab, b.vals("c", rc), "mul_abc"))
    return p


@pytest.mark.parametrize("seed", range(4))
def test_intersect_arity3_on_deep_channels_matches_simulator(seed):
    """An arity-3 intersect behind level scans on depth-3 channels: no look-ahead (arity 2 only, the registry's
    input_depth_for), in the simulator and the RTL alike: RTL cycles equal to the simulator's."""
    for density in (0.3, 0.6):
        p = deepen_intersect_inputs(vector_mul3(24))
        b = build(p, kernels.random_inputs(p, density=density, seed=seed), op_factory=factory)
        joins = [op for ops in b.top.ops for op in ops.values() if op.op_name == "intersect"]
        assert len(joins) == 1 and joins[0].params["arity"] == 3 and not joins[0].peek_ports()
        res = run_amaranth(b, max_cycles=20 * b.reference.cycles + 1000)
        check(b, res)


def test_lookahead_on_a_shallow_channel_is_refused():
    from fuseflow.hw.top import ProgramTop

    def eager(program, kernel, node):
        op = default_factory(program, kernel, node)
        if node.op == "intersect":
            op._MustUse__silence = True
            op = MODULES["intersect"](op_params(program, node), connected=op.connected, lookahead=True)
        return op
    import gc
    import warnings

    from amaranth.hdl import Fragment
    p = deepen_intersect_inputs(kernels.build("vector_mul"), None)
    b = build(p, kernels.random_inputs(p, density=0.5, seed=3))
    b.top._MustUse__silence = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the aborted elaboration leaves unused modules behind
        with pytest.raises(HardwareError, match="look-ahead on port crd0 needs a channel of depth >= 3, got 2"):
            Fragment.get(ProgramTop(p, b.plan, op_factory=eager), None)
        gc.collect()


# --- the command line (Amaranth simulator path; the Verilator path is in test_verilator.py) ----------------

def _save(p, path):
    from fuseflow.samml import save
    save(p, path)
    return str(path)


def test_cli_build_writes_verilog_and_manifest(tmp_path, capsys):
    from fuseflow.hw.__main__ import main
    graph = _save(copy_program(capacity=[6, 6]), tmp_path / "graph.json")
    assert main(["build", graph, "-o", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "copy.v").read_text()
    assert "module copy(" in text
    man = json.loads((tmp_path / "out" / "copy.json").read_text())
    assert man["module"] == "copy" and not man["baked"]
    assert {m_["name"]: m_["depth"] for m_ in man["host"]["memories"]}["c.vals"] == 6
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["copy.json", "copy.v"]


def test_cli_build_bakes_inputs(tmp_path):
    from fuseflow.hw.__main__ import main
    from fuseflow.tensors.io import save_npz
    graph = _save(copy_program(), tmp_path / "graph.json")
    save_npz(tmp_path / "in.npz", {"c": VEC})
    assert main(["build", graph, "-o", str(tmp_path / "out"), "--inputs", str(tmp_path / "in.npz")]) == 0
    man = json.loads((tmp_path / "out" / "copy.json").read_text())
    assert man["baked"] and man["tensors"][0]["capacity_source"] == "data"


def test_cli_sim_amaranth_bit_identical(tmp_path, capsys):
    from fuseflow.hw.__main__ import main
    from fuseflow.tensors.io import save_npz
    p = kernels.build("spmv_dcsr")
    graph = _save(p, tmp_path / "graph.json")
    save_npz(tmp_path / "in.npz", kernels.random_inputs(p, seed=7))
    code = main(["sim", graph, "--inputs", str(tmp_path / "in.npz"), "--simulator", "amaranth",
                 "--vcd", str(tmp_path / "w.vcd"), "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "outputs bit-identical to the reference simulator: x" in out
    assert "(equal)" in out
    assert (tmp_path / "w.vcd").stat().st_size > 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["ok"] and r["cycles_equal"]


@pytest.mark.parametrize("case", ["no-capacity", "over-capacity", "value-width", "bad-graph"])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, case):
    from fuseflow.hw.__main__ import main
    from fuseflow.tensors.io import save_npz
    out = tmp_path / "out"
    if case == "no-capacity":
        args = ["build", _save(copy_program(), tmp_path / "g.json"), "-o", str(out)]
    elif case == "bad-graph":
        (tmp_path / "g.json").write_text('{"samml": 1, "name": "x"}')
        args = ["build", str(tmp_path / "g.json"), "-o", str(out)]
    else:
        graph = _save(copy_program(capacity=[2, 2]), tmp_path / "g.json")
        data = VEC if case == "over-capacity" else np.array([0, 40000.0, 0, 0, 0, 0, 0, 0])
        save_npz(tmp_path / "in.npz", {"c": data})
        args = ["sim", graph, "--inputs", str(tmp_path / "in.npz"), "--simulator", "amaranth",
                "--json", str(out / "r.json")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())       # nothing half-written


# --- programs from the compiler (fused and unfused: several kernels, intermediates through memories) -------

def compiled(name, fuse):
    import os

    from fuseflow.compiler import compile_text
    root = os.path.join(os.path.dirname(__file__), "..", "..", "fuseflow", "programs")
    with open(os.path.join(root, f"{name}.ff")) as f:
        return compile_text(f.read(), fuse=fuse, name=name).program


def run_compiled(name, fuse, seed=0):
    p = compiled(name, fuse)
    need_ops(p)
    inputs = kernels.random_inputs(p, density=0.4, seed=seed)
    b = build(p, inputs)
    res = run_amaranth(b, max_cycles=20 * b.reference.cycles + 2000)
    check(b, res)
    return b


def test_compiled_unfused_program_runs_kernels_in_sequence():
    b = run_compiled("elementwise", "none")
    assert len(b.program.kernels) == 3
    assert any(t.role == "intermediate" for t in b.program.tensors.values())


CORPUS = ["chain3", "chain4", "elementwise", "gcn", "gcn2", "graphsage", "multiuse", "permute3", "reductions", "sddmm",
          "spmm", "spmv"]


@pytest.mark.slow
@pytest.mark.parametrize("fuse", ["none", "full"])
@pytest.mark.parametrize("name", CORPUS)
def test_compiled_corpus_matches_simulator(name, fuse):
    run_compiled(name, fuse)


def test_host_port_writes_and_reads_every_memory_while_idle():
    """Round trip through the host port on every memory, outputs included (writer ops held in reset must not
    disturb them)."""
    from amaranth.sim import Simulator

    from fuseflow.hw.elaborate import AmaranthDriver
    p = copy_program(kernels_=2, capacity=[5, 5])
    need_ops(p)
    b = build(p)
    man = b.manifest()
    got = {}

    async def bench(ctx):
        drv = AmaranthDriver(ctx, b.top)
        for m_ in man["host"]["memories"]:
            words = [(0x5A5A + 7 * i + m_["sel"]) & ((1 << m_["width"]) - 1) for i in range(m_["depth"])]
            await drv.write_burst(m_["sel"], 0, words)
        for m_ in man["host"]["memories"]:
            got[m_["name"]] = await drv.read_burst(m_["sel"], 0, m_["depth"])

    sim = Simulator(b.top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for m_ in man["host"]["memories"]:
        assert got[m_["name"]] == [(0x5A5A + 7 * i + m_["sel"]) & ((1 << m_["width"]) - 1)
                                   for i in range(m_["depth"])], m_["name"]


def test_union_mixing_references_and_values():
    """A joiner whose ref<i> ports carry a reference stream and a value stream (the compiler emits such unions):
    the op is built for the wider kind, so values above 16 bits pass unharmed."""
    p = Program("mixed_union")
    p.tensor("a", "input", [8], ["compressed"])
    p.tensor("b", "input", [8], ["compressed"])
    p.tensor("x", "output", [8], ["compressed"])
    k = p.kernel("main")
    sa = k.add("level_scan", {"ref": k.add("root", id="root_a")["ref"]}, id="scan_a", tensor="a", level=0,
               format="compressed")
    sb = k.add("level_scan", {"ref": k.add("root", id="root_b")["ref"]}, id="scan_b", tensor="b", level=0,
               format="compressed")
    vb = k.add("array", {"ref": sb["ref"]}, id="vals_b", tensor="b")
    u = k.add("union", {"crd0": sa["crd"], "ref0": sa["ref"], "crd1": sb["crd"], "ref1": vb["val"]}, id="u",
              arity=2)
    va = k.add("array", {"ref": u["ref0"]}, id="vals_a", tensor="a")
    s = k.add("alu", {"a": va["val"], "b": u["ref1"]}, id="add", op="add")
    k.add("level_write", {"crd": u["crd"]}, id="write_x0", tensor="x", level=0, format="compressed")
    k.add("value_write", {"val": s["out"]}, id="write_x_vals", tensor="x")
    p.validate()
    assert k.streams["u.ref1"].kind == "val"
    a = np.array([0, 1.5, 0, -2, 0, 0, 3.25, 0])
    bb = np.array([4.5, 0, 0, -7.75, 0, 2.0, 0, 0])
    b = build(p, {"a": a, "b": bb})
    res = run_amaranth(b, max_cycles=1000)
    check(b, res)


def test_trace_localises_the_op_that_diverges():
    """run_amaranth(trace=True) records every channel; localise() re-runs each op's reference model on the RTL's
    own inputs and names the ops whose RTL output differs (here an adder built as a subtractor)."""
    from fuseflow.hw.elaborate import localise
    p = kernels.build("vector_add")
    inputs = kernels.random_inputs(p, density=0.7, seed=4)
    b = build(p, inputs)
    res = run_amaranth(b, max_cycles=1000, trace=True)
    check(b, res)
    assert localise(b, res["trace"]) == []
    assert res["trace"]["main.add.out -> write_x_vals.val"][-1] == "D"

    def wrong(program, kernel, node):
        if node.op == "alu":
            from fuseflow.hw.ops import MODULES
            v = program.config["value"]
            return MODULES["alu"](dict(node.params, op="sub"), fixed=FixedFormat(v["width"], v["frac"]),
                                  connected={"a", "b"})
        return factory(program, kernel, node)

    b2 = build(p, inputs, op_factory=wrong)
    res2 = run_amaranth(b2, max_cycles=1000, trace=True)
    assert compare_tensors(b2.reference.tensors, res2["tensors"]) != []
    assert [(k, n) for k, n, *_ in localise(b2, res2["trace"])] == [("main", "add")]


def test_localise_needs_a_build_made_with_inputs():
    from fuseflow.hw.elaborate import localise
    b = build(kernels.spmv(m=4, n=4, fmt="csr"))           # capacities from the graph: no reference run
    b.top._MustUse__silence = True                          # never elaborated
    with pytest.raises(HardwareError, match="needs a build made with inputs"):
        localise(b, {})


# --- random programs from the compiler's generator (slow) ----------------------------------------------------

def _compiler_randprog():
    import os
    import sys
    d = os.path.join(os.path.dirname(__file__), "..", "compiler")
    if d not in sys.path:
        sys.path.insert(0, d)
    try:
        import compiler_randprog
    except ImportError:
        pytest.skip("the compiler's random program generator is not available")
    return compiler_randprog


@pytest.mark.slow
def test_random_compiled_programs_match_simulator():
    """Random 2-5 statement programs (the compiler tests' generator), compiled at every fusion level: the RTL is
    bit-identical and cycle-exact to the fixed-mode simulator; on a mismatch the diverging op is named."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from fuseflow.compiler import EinsumProgram, compile_program
    from fuseflow.errors import ProgramError
    from fuseflow.hw.elaborate import localise
    randprog = _compiler_randprog()

    @settings(max_examples=25, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(randprog.random_programs(), st.sampled_from(["none", "regions", "full"]), st.integers(0, 2**16))
    def run(rp, fuse, seed):
        try:
            p = compile_program(EinsumProgram.parse(rp.text, "rand").to_ir(), fuse=fuse).program
        except ProgramError:
            return
        rng = np.random.default_rng(seed)
        inputs = {t.name: np.where(rng.random(t.shape) < rp.densities.get(t.name, 0.5),
                                   np.round(rng.uniform(-2, 2, t.shape), 2), 0.0) for t in p.inputs}
        b = build(p, inputs)
        res = run_amaranth(b, max_cycles=20 * b.reference.cycles + 2000, trace=True)
        assert res["done"], rp.text
        mism = compare_tensors(b.reference.tensors, res["tensors"])
        where = localise(b, res["trace"]) if mism else []
        assert not mism, (rp.text, fuse, mism, where[:2])
        assert [res["kernel_cycles"][k.name] for k in p.kernels] == list(b.reference.kernel_cycles), rp.text

    run()


def test_highest_set_bit_tree_matches_bit_length():
    """The last_event register's encoder (a tree): the index of the highest set bit, for every pattern of 1-7
    bits (golden: int.bit_length)."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from fuseflow.hw.top import _highest
    for n in range(1, 8):
        bits = Signal(n)
        found, idx = _highest(bits)
        m = Module()
        f, i = Signal(), Signal(4)
        m.d.comb += [f.eq(found), i.eq(idx)]
        sim = Simulator(m)

        async def tb(ctx, n=n, bits=bits, f=f, i=i):
            for v in range(1 << n):
                ctx.set(bits, v)
                assert ctx.get(f) == (v != 0)
                if v:
                    assert ctx.get(i) == v.bit_length() - 1, (n, v)
        sim.add_testbench(tb)
        sim.run()


@pytest.mark.parametrize("n, part", [(1, 4), (5, 4), (8, 4), (13, 4), (40, 16)])
def test_highest_set_bit_in_registered_parts_matches_bit_length(n, part):
    """The last_event encoder's two stages (each part's highest registered, then the highest part): a cycle after
    each of 200 random patterns (some all zero, some single bits) of n bits, whether one was set and the index of
    the highest (golden: int.bit_length)."""
    import random

    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from fuseflow.hw.top import _highest_in_parts
    rng = random.Random(n * 100 + part)
    bits = Signal(n)
    m = Module()
    found, idx = _highest_in_parts(m, bits, "t", part)
    f, i = Signal(), Signal(8)
    m.d.comb += [f.eq(found), i.eq(idx)]
    sim = Simulator(m)
    sim.add_clock(1e-6)
    patterns = [0, (1 << n) - 1] + [1 << rng.randrange(n) for _ in range(40)] + \
               [rng.getrandbits(n) & rng.getrandbits(n) for _ in range(158)]

    async def tb(ctx):
        for v in patterns:
            ctx.set(bits, v)
            await ctx.tick()
            assert ctx.get(f) == (v != 0), (n, v)
            if v:
                assert ctx.get(i) == v.bit_length() - 1, (n, part, v)
    sim.add_testbench(tb)
    sim.run()


def test_last_event_names_a_writer_taking_the_final_token():
    """A kernel ends when its writers have taken D, so the event of its last firing cycle is a pop into a writer."""
    program = kernels.build("spmv_csr", 6)
    b = build(program, kernels.random_inputs(program, density=0.4, seed=2), probes=False)
    res = run_amaranth(b)
    assert res["done"] and res["cycles"] == b.reference.cycles
    writers = {nid for k in program.kernels for nid, node in k.nodes.items() if node.op.endswith("_write")}
    ev = res["last_event"]["main"]
    assert ev.endswith("popped") and ev.split(" -> ")[1].split(".")[0] in writers


@pytest.mark.parametrize("seed", [0, 1])
def test_intersect_inputs_sharing_a_union_match_the_simulator(seed):
    # y = c * (b1 + ... + b5): five inputs of an arity-6 intersect share the union's crd; the ring rule lets them
    # drift apart by up to 4 tokens, which their depth-5 floor absorbs (every other channel at depth 2). The RTL
    # gives the simulator's tensors and cycles (the simulator's tensors are checked against NumPy in
    # tests/compiler/test_passes_depths.py)
    from fuseflow.compiler import compile_text
    terms = [f"b{t}" for t in range(1, 6)]
    decl = "".join(f"tensor {x}(12) : sparse\n" for x in ["c", *terms])
    p = compile_text(decl + f"y(i) = c(i) * ({' + '.join(f'{x}(i)' for x in terms)})\n",
                     passes={"fifo_depth": 2}).program
    need_ops(p)
    k = p.kernels[0]
    assert {s.depth for s in k.streams.values() if s.src.node == "union"} == {5}
    inputs = kernels.random_inputs(p, density=0.5, seed=seed)
    b = build(p, inputs, op_factory=factory)
    check(b, run_amaranth(b, max_cycles=5000))


def test_budget_fitted_depths_match_simulator():
    """Depths the budget gave back part of (issue 45: between depth 2 and the depth each channel wants) are the
    RTL's channel depths too: outputs and cycles equal the simulator's."""
    import os

    from fuseflow.compiler import compile_text
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "fuseflow", "programs", "gcn.ff")) as f:
        text = f.read()
    floor_only = compile_text(text, name="gcn", passes={"budget_bits": 0}).reports["depths"]
    base = floor_only["total_bits"] - floor_only["floor_bits"]
    budget = base + (floor_only["wanted_bits"] - floor_only["floor_bits"] - base) // 2
    got = compile_text(text, name="gcn", passes={"budget_bits": budget})
    rep = got.reports["depths"]
    assert any(r["depth"] < r["wanted"] for r in rep["channels"])                    # some trimmed
    assert any(r["depth"] > 2 and r["why"] != "floor" for r in rep["channels"])      # some given bits back
    p = got.program
    need_ops(p)
    b = build(p, kernels.random_inputs(p, density=0.4, seed=2))
    check(b, run_amaranth(b, max_cycles=20 * b.reference.cycles + 2000))
