"""``make demo``: a two-layer GCN on Zachary's karate club, from PyTorch to checked Verilog.

Compiles the PyTorch model at the paper's three fusion granularities (unfused, partial: one region per
layer, full), simulates each in fixed point and checks it against the PyTorch model, picks the fastest,
builds its Verilog, runs it on Verilator (bit-compared with the simulator) and draws its graph.
"""

import argparse
import os
import sys
import time
import warnings

from .cli import atomic_write, describe, main_guard, output_dir


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fuseflow demo", description=describe(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", default="out/demo", type=output_dir, help="where Verilog, graphs and pictures go")
    ap.add_argument("--features", type=int, default=16, help="input features per node (default 16)")
    ap.add_argument("--no-rtl", action="store_true", help="skip the Verilator run")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
    t_start = time.perf_counter()
    try:
        import torch  # noqa: F401
    except ImportError:
        from .errors import FuseFlowError
        raise FuseFlowError("demo", "needs PyTorch: pip install 'fuseflow[torch]'") from None
    import fuseflow
    from .models import GCN
    from .models.data import karate_club
    from .samml.dot import has_graphviz, to_svg

    g = karate_club(args.features)
    model = GCN(in_features=args.features, hidden=8, classes=4)
    inputs = (g.adjacency, g.features)
    print(f"FuseFlow-HW demo: two-layer GCN (PyTorch) on Zachary's karate club: {g.nodes} nodes, "
          f"{g.adjacency.values().numel()} adjacency entries ({100 * (1 - g.adjacency.values().numel() / g.nodes ** 2):.0f}% "
          f"sparse), {args.features} features\n")
    rows, failures, compiled = [], 0, {}
    for config, fuse in GCN.FUSION.items():
        m = fuseflow.compile(model, inputs, fuse=fuse, mode="fixed")
        fixed = m.check()
        flt = m.check(mode="float")
        failures += not (fixed.ok and flt.ok)
        s = fixed.simulation
        compiled[config] = (m, s)
        rows.append((config, fuse, len(m.program.kernels), s.cycles, s.stats["alu_ops"],
                     s.stats["mem_read_bytes"] + s.stats["mem_write_bytes"], m.compile_seconds * 1e3,
                     f"{flt.max_rel_error:.1e}", f"{fixed.max_abs_error:.1e}",
                     "yes" if fixed.ok and flt.ok else "NO"))
    best = min(compiled, key=lambda c: compiled[c][1].cycles)
    base = compiled["unfused"][1].cycles
    head = ("config", "fuse", "kernels", "cycles", "ALU ops", "bytes", "compile ms", "float err", "fixed err",
            "= PyTorch")
    table = [head] + [(r[0], r[1], r[2], r[3], r[4], r[5], f"{r[6]:.0f}", r[7], r[8], r[9]) for r in rows]
    widths = [max(len(str(r[c])) for r in table) for c in range(len(head))]
    for i, r in enumerate(table):
        print("  " + "  ".join(str(v).rjust(w) if c >= 2 else str(v).ljust(w) for c, (v, w) in enumerate(zip(r, widths))))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))
    print(f"\n  fastest: {best} ({base / compiled[best][1].cycles:.2f}x the unfused cycles); errors are the largest "
          f"relative (float) and absolute (fixed 32/16) differences from the PyTorch model in float64\n")
    m, sim = compiled[best]
    folder = os.path.join(args.output, f"gcn_{best}")
    rtl = None
    if args.no_rtl:
        paths = m.build(folder, inputs=inputs)
    else:
        # one elaboration serves the files and the Verilator run; the design's C++ at -O0 halves the compile
        t0 = time.perf_counter()
        rtl = m.rtl_sim(out_dir=folder, compile_fast=True)
        paths = rtl["paths"]
    with atomic_write(os.path.join(folder, "graph.svg")) as f:
        f.write(to_svg(m.program))
    print(f"  {best}: Verilog {paths['verilog']}, manifest {paths['manifest']}, graph {folder}/graph.svg, "
          f"program {paths['ff']}")
    if rtl is not None:
        ok = rtl["ok"] and rtl["cycles_equal"]
        failures += not ok
        print(f"  Verilator: {rtl['rtl_cycles']} cycles, simulator {rtl['sim_cycles']} cycles "
              f"({'equal' if rtl['cycles_equal'] else 'DIFFERENT'}); outputs "
              f"{'bit-identical to the simulator' if rtl['ok'] else 'DIFFER: ' + '; '.join(rtl['mismatches'][:2])} "
              f"({time.perf_counter() - t0:.0f} s: elaboration, Verilator compile, run)")
    if not has_graphviz():
        print("  note: graphviz is not installed, so the SVG was drawn with matplotlib")
    print(f"\ndemo {'FAILED' if failures else 'passed'} in {time.perf_counter() - t_start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
