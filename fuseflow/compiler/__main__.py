"""``fuseflow compile``: compile ``.ff`` programs to SAMML ``graph.json``.

    fuseflow compile prog.ff -o out/ [--fuse none|regions|full|auto] [--order [KERNEL=]i,k,j ...]
                     [--parallel INDEX=N] [--list-orders] [--max-orders N] [--dump-table]
                     [--tile INDEX=SIZE] [--onchip-bits N] [--dma KEY=N,...] [--tile-fusion HOW] [--list-tiles]
                     [--iteration factored|global] [--skip STAGE ...] [--fifo-depth N]
                     [--fifo-budget BITS] [--board NAME] [--profile] [--dump-after STAGE]
                     [--check] [--simulate] [--report] [--build DIR] [--rtl-sim] [--mode fixed|float] [--inputs FILE]

Writes ``out/graph.json``, ``out/fifos.json`` (every channel's depth and FIFO bits against the budget) and
``out/graph.svg`` when graphviz's ``dot`` is installed. ``--list-orders`` prints every valid dataflow order of
every kernel (capped at ``--max-orders``), ``--dump-table`` the fusion tables and the channel depths.
``--dump-after STAGE`` prints the IR's text (before ``codegen``) or graph.json after any stage of the pipeline
(docs/compiler.md lists them); ``--skip STAGE`` leaves out a skippable stage (locate, drop_empty).
``--fifo-depth N`` gives every channel depth N (deadlock floors kept) instead of the depths pass's choice;
``--board NAME`` takes the default ``--fifo-budget`` from that board's memory for channel FIFOs.
``--tile i=1024`` splits index i into tiles of 1024 (as ``tile i 1024`` in the program) and ``--onchip-bits N``
chooses tile sizes that fit N bits of on-chip memory (default with ``--board``: the board's block RAM); the
program then runs once per non-empty tile, its tensors loaded from and stored to off-chip memory
(docs/tiling.md); ``--dma buffers=1,...`` sets the tiled program's off-chip contract (the RTL runs ``buffers`` 1
and 2); ``--tile-fusion wavefront|recompute|materialise`` overrides the cost model's choice for a tiled fuse region
of two products; ``--list-tiles`` prints the tiles chosen and why.
``--fuse auto`` picks granularity and orders
(fuseflow.compiler.autoschedule) for sample data (``--inputs`` or ``--density``) under
``--max-nodes``/``--max-kernels``, and parallel factors too with ``--max-lanes N`` (lanes per kernel; with
``--parallel`` instead, every schedule gets those lanes). ``--check``, ``--simulate``, ``--report``, ``--build`` and
``--rtl-sim`` do what they do for a PyTorch model, on ``--inputs`` or on deterministic data of the declared shapes
and formats, and ``--check`` compares with NumPy. Bad programs give ``error: <what>: <why>`` on one line and exit
status 2.
"""

import argparse
import os
import sys
import time

from ..cli import check_output_dir, describe, main_guard, output_dir, positive_int
from ..model_cli import add_action_arguments
from ..errors import ProgramError
from .options import CompileOptions
from .defaults import DEFAULT_BUDGET_BITS, DEFAULT_MAX_ORDERS, SCHEDULES, TILE_FUSION
from .passes import PIPELINE, stage_names


def parser():
    ap = argparse.ArgumentParser(prog="fuseflow", description=describe(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile a .ff program to graph.json", description=describe(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("program", help="the .ff source file")
    c.add_argument("-o", "--output", type=output_dir, help="output directory (graph.json is written there)")
    c.add_argument("--fuse", default="regions", choices=tuple(SCHEDULES) + ("auto",),
                   help="fusion granularity: none (one kernel per statement), regions (the program's fuse { } "
                        "regions; default), full (everything fused), auto (the autoscheduler picks it and the "
                        "orders)")
    c.add_argument("--inputs", nargs="+", metavar="FILE",
                   help="sample inputs (tensor files, as for sim run) of --fuse auto and of --check/--simulate/"
                        "--report/--build/--rtl-sim (default: data of the declared shapes and formats)")
    c.add_argument("--density", type=float, default=0.1,
                   help="--fuse auto without --inputs: density of the sparse inputs (default 0.1)")
    c.add_argument("--max-nodes", type=int, help="--fuse auto: resource budget in SAMML nodes")
    c.add_argument("--max-kernels", type=int, help="--fuse auto: resource budget in kernels")
    c.add_argument("--max-lanes", type=int, help="--fuse auto: also choose parallel factors (2, 4, 8 per index, "
                                                 "nested pairs), at most this many lanes per kernel")
    c.add_argument("--memory", default="hbm2", help="--fuse auto: memory the schedules are ranked under")
    c.add_argument("--budget", type=float, default=60.0, help="--fuse auto: time budget in seconds (default 60)")
    c.add_argument("--no-simulate", action="store_true",
                   help="--fuse auto: rank with the cost model only, simulate no candidate")
    c.add_argument("--redundancy", choices=("warn", "rewrite", "ignore"), default="warn",
                   help="a fused kernel that does more work than unfused (cost model): warn (default), rewrite "
                        "(materialise or reassociate what it recomputes) or ignore")
    c.add_argument("--order", action="append",
                   help="dataflow order, outer to inner: i,k,j (every kernel uses the indices it has), or "
                        "KERNEL=i,k,j for one kernel (repeat for several; --list-orders prints them so)")
    c.add_argument("--parallel", action="append", metavar="INDEX=N",
                   help="run the sub-tree below INDEX on N lanes (e.g. i=4; comma-separated or repeated for "
                        "several indices: nested lanes, e.g. i=4,j=2)")
    c.add_argument("--tile", action="append", metavar="INDEX=SIZE",
                   help="split INDEX into tiles of SIZE (e.g. i=1024; comma-separated or repeated for several "
                        "indices): the program runs once per non-empty tile (docs/tiling.md)")
    c.add_argument("--onchip-bits", type=int, metavar="N",
                   help="choose the tile sizes so that one tile fits N bits of on-chip memory (default with "
                        "--board: the board's block RAM; without either, nothing is tiled)")
    c.add_argument("--dma", metavar="KEY=N,...",
                   help="a tiled program's off-chip contract: word_bytes, latency, burst, outstanding, buffers, pack "
                        "(default: the registry's dma, buffers 2)")
    c.add_argument("--tile-fusion", choices=TILE_FUSION,
                   help="how a tiled fuse region of two products runs (default: the cost model's choice; "
                        "docs/tiling.md, Tile fusion)")
    c.add_argument("--min-tiles", type=positive_int, metavar="N",
                   help="with --onchip-bits: split the output rows into at least N tiles (of at least 64 rows) even "
                        "when the program fits, so that loads from off-chip memory stream behind the runs")
    c.add_argument("--list-tiles", action="store_true", help="print the tiles chosen and why")
    c.add_argument("--list-orders", action="store_true", help="print every valid dataflow order of each kernel")
    c.add_argument("--max-orders", type=positive_int, default=DEFAULT_MAX_ORDERS,
                   help=f"cap for --list-orders (default {DEFAULT_MAX_ORDERS})")
    c.add_argument("--dump-table", action="store_true", help="print the fusion table of each kernel")
    c.add_argument("--iteration", default="factored", choices=("factored", "global"),
                   help="factored iteration (default) or one global iteration space per kernel (for comparison)")
    c.add_argument("--skip", action="append", metavar="STAGE", default=[],
                   help="leave out a stage (repeatable; skippable: "
                        f"{', '.join(s.name for s in PIPELINE if s.skippable)}), for comparison")
    c.add_argument("--no-locate", action="append_const", dest="skip", const="locate",
                   help="--skip locate: scan dense operands of intersections instead of locating into them")
    c.add_argument("--no-drop-empty", action="append_const", dest="skip", const="drop_empty",
                   help="--skip drop_empty: let a CSR operand's empty rows run through the graph")
    c.add_argument("--fifo-depth", type=int, help="every channel gets this depth (overrides the depths pass; "
                                                   "deadlock floors kept)")
    c.add_argument("--fifo-budget", type=int,
                   help=f"budget of FIFO bits for the depths pass (default: a tenth of --board's memory for "
                        f"channel FIFOs, else {DEFAULT_BUDGET_BITS}, about that of the ULX3S-85F; docs/compiler.md)")
    c.add_argument("--board", help="the target board (ulx3s-85f, icebreaker): sets the default --fifo-budget")
    c.add_argument("--profile", action="store_true",
                   help="also size channel depths by simulating synthetic inputs of the declared shapes and "
                        "densities (slower; the graph's structure alone is the default)")
    c.add_argument("--dump-after", metavar="STAGE",
                   help="print the IR's text (before codegen) or graph.json after this stage (stages: "
                        f"{', '.join(stage_names())})")
    add_action_arguments(c, "NumPy")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    if args.cmd == "compile":
        return compile_cmd(args)
    return 0


def _auto(src, args):
    from .autoschedule import autoschedule
    inputs = densities = None
    if args.inputs:
        from ..samml.sample import load_files
        inputs = load_files(args.inputs)
    else:
        if not 0 < args.density <= 1:
            raise ProgramError("--density", f"must be in (0, 1], got {args.density}")
        ir = src.to_ir()
        densities = {name: args.density for name in getattr(ir, "tensors", {})}
    from .lanes import parse_parallel
    auto = autoschedule(src, inputs=inputs, densities=densities, max_nodes=args.max_nodes,
                        max_kernels=args.max_kernels, memory=args.memory, max_lanes=args.max_lanes,
                        parallel=parse_parallel(args.parallel) or None, budget=args.budget,
                        simulate=not args.no_simulate, progress=args.progress or sys.stderr.isatty())
    c = auto.chosen
    orders = ", ".join(f"{k}: {','.join(v)}" for k, v in (c.order or {}).items())
    groups = " ".join("{" + ",".join(g) + "}" for g in c.groups or [])
    lanes = ",".join(f"{i}={f}" for i, f in (c.parallel or {}).items()) or "none"
    cycles = (f"{c.simulated_cycles} simulated cycles" if c.simulated_cycles is not None else
              f"{c.estimated_cycles:.0f} estimated cycles (not simulated)")
    print(f"auto: fuse={c.fuse} kernels {groups} orders {orders} parallel {lanes} ({c.kernels} kernel(s), "
          f"{c.nodes} nodes; {cycles} with {args.memory}; {len(auto.candidates)} schedules ranked)", file=sys.stderr)
    for line in auto.report().splitlines()[1:]:
        print(line, file=sys.stderr)
    return auto.result


def compile_cmd(args):
    acts = args.check or args.simulate or args.report or args.build or args.rtl_sim
    if not (args.output or args.list_orders or args.list_tiles or args.dump_table or args.dump_after or acts):
        raise ProgramError("arguments", "nothing to do: give -o OUT (and/or --list-orders, --dump-table, --check, "
                                        "--report, --build DIR)")
    if args.max_orders < 1:
        raise ProgramError("--max-orders", "must be at least 1")
    options = CompileOptions(fuse=args.fuse if args.fuse != "auto" else "regions", order=args.order,
                             iteration=args.iteration, parallel=args.parallel, onchip_bits=args.onchip_bits,
                             dma=args.dma, skip=args.skip, dump_after=args.dump_after, fifo_depth=args.fifo_depth,
                             budget_bits=args.fifo_budget, board=args.board, profile=args.profile,
                             min_tiles=args.min_tiles)
    if args.fuse == "auto" and (args.tile or args.onchip_bits is not None):
        raise ProgramError("--tile" if args.tile else "--onchip-bits", "tiling does not combine with --fuse auto "
                                                                        "(give --fuse none|regions|full)")
    if args.fuse != "auto" and args.max_lanes is not None:
        raise ProgramError("--max-lanes", "is a budget for --fuse auto (give --parallel INDEX=N for fixed lanes)")
    if args.output:
        check_output_dir(args.output)          # before compiling: a bad -o fails fast and names itself
    from . import parse_file
    from .fusion import KernelPlan
    src = parse_file(args.program)
    t0 = time.perf_counter()
    if args.fuse == "auto":
        if args.parallel and args.max_lanes is not None:
            raise ProgramError("--parallel", "give fixed lanes (--parallel) or a lane budget (--max-lanes), not both")
        result = _auto(src, args)
    else:
        if args.board:
            from ..boards.catalog import get_board
            get_board(args.board)              # an unknown board fails before compiling, naming the known ones
        result = _compile_tiled(src, args, options)
        if result is None:
            result = _compile_checked(src, args, options)
    seconds = time.perf_counter() - t0
    if args.dump_after and "dump" in result.reports:
        print(result.reports["dump"])
    if args.list_orders:
        from . import list_orders
        for p, orders, capped, refused in list_orders(src, result, args.max_orders, args.fuse, args.order,
                                                       args.iteration, args.parallel):
            if not isinstance(p, KernelPlan):
                how = "cheap" if p.cheap else "general"
                print(f"kernel {p.name}: transpose {p.src} -> {p.dst} (mode order "
                      f"{','.join(map(str, p.dst_mode_order))}, {how} kernel; no dataflow order)")
                continue
            more = f" (capped at {args.max_orders}; more may exist, raise --max-orders)" if capped else ""
            print(f"kernel {p.name}: {p.describe()}")
            print(f"  {len(orders)} valid dataflow order{'s' if len(orders) != 1 else ''}{more}")
            for mode_order, n, why in refused:
                print(f"  ({n} more order(s) of this kernel alone left out: they store {p.out} with mode order "
                      f"{','.join(map(str, mode_order))} and then {why})")
            if orders:
                print(f"  (give one back with --order {p.out}={','.join(orders[0])})")
            for o in orders:
                print(f"    {','.join(o)}" + ("   (selected)" if tuple(o) == tuple(p.order) else ""))
    if args.list_tiles or (args.dump_table and result.program.tiling is not None):
        from .tiling import render_tiles
        print(render_tiles(result.program))
    if args.dump_table:
        for p in result.plans:
            if isinstance(p, KernelPlan):
                t = result.tables[p.name]
                print(t.render(f"fusion table of kernel {p.name}, order {','.join(p.order)}: {p.describe()}"))
                for n in p.notes:
                    print(f"  note: {n}")
        _print_intermediate_densities(result.program)
        print(render_depths(result.reports["depths"]))
    if args.output:
        from ..samml import save
        path = os.path.join(args.output, "graph.json")
        from ..cli import atomic_write
        import json
        fifos = os.path.join(args.output, "fifos.json")
        with atomic_write(fifos) as f:
            f.write(json.dumps(result.reports["depths"], indent=1) + "\n")
        save(result.program, path)
        dep = result.reports["depths"]
        msg = f"wrote {path}: {len(result.program.kernels)} kernel(s), " \
              f"{sum(len(k.nodes) for k in result.program.kernels)} nodes, crd_width " \
              f"{result.program.config['crd_width']}, FIFOs {dep['total_bits']} bits, a budget of " \
              f"{dep['budget_bits']}{_on_top(dep)} (+ {fifos})"
        if dep["trimmed"]:
            # trimmed channels stall the branch beside a long pipeline (the decoder's regions: 14x the cycles)
            msg += f"; the budget gave {dep['trimmed']} channel(s) less than they asked for (--dump-table lists " \
                   f"them): --fifo-budget {dep['full_budget_bits']} keeps every channel at the depth it asks for"
        try:
            from ..samml.dot import has_graphviz, to_svg
            if has_graphviz():
                from ..cli import atomic_write
                svg = os.path.join(args.output, "graph.svg")
                text = to_svg(result.program, renderer="graphviz")
                with atomic_write(svg) as f:
                    f.write(text)
                msg += f" (+ {svg})"
        except ImportError:
            pass
        if result.program.tiling is not None:
            t = result.program.tiling
            msg += "; tiled " + ", ".join(f"{d} {v['size']} of {v['extent']}" for d, v in t["dims"].items()) + \
                f" ({t['tile_bits']} on-chip bits per tile)"
        print(msg, file=sys.stderr if (args.list_orders or args.dump_table or args.list_tiles) else sys.stdout)
    if acts:
        return _actions(src, result, args, seconds)
    return 0


def _compile_tiled(src, args, options):
    """The program compiled tiled (``--tile``, ``--onchip-bits``, the program's ``tile`` lines, or ``--board``'s
    block RAM as the budget); None when no tiling is asked for, or the board's budget holds the untiled program."""
    from . import compile_program
    from .tiling import parse_tiles
    tiles = parse_tiles(args.tile)
    budget = args.onchip_bits
    by_board = False
    if not tiles and budget is None and not src.tile_sizes and args.board:
        from ..boards.catalog import onchip_bits
        budget, by_board = onchip_bits(args.board), True
    if not (tiles or budget is not None or src.tile_sizes):
        return None
    data = None
    if args.inputs:
        from ..samml.sample import load_files
        data = load_files(args.inputs)
    try:
        result = compile_program(src, options.replace(tiles=tiles, onchip_bits=budget, tile_inputs=data,
                                                      tile_fusion=args.tile_fusion))
    except ProgramError as exc:
        if not by_board or exc.what != "--onchip-bits":
            raise
        print(f"note: {args.board}'s block RAM holds no tile of this program ({exc.why}): compiled untiled",
              file=sys.stderr)
        return None
    if result.program.tiling is None:
        return None                    # nothing to split: the untiled program, compiled as without tiling
    if by_board:
        print(f"note: the program does not fit {args.board}'s {budget} bits of block RAM: tiled (--onchip-bits "
              f"sets another budget)", file=sys.stderr)
    return result


def _compile_checked(src, args, options):
    """The program compiled at ``--fuse`` and, unless ``--redundancy ignore``, every fused kernel checked against
    the unfused program by the cost model on the program's deterministic example data (as ``fuseflow.compile``
    does; :mod:`fuseflow.compiler.redundancy`): one ``warning:`` line per kernel that does more work, or with
    ``--redundancy rewrite`` the rewritten program and a ``note:`` line saying what was done."""
    from . import compile_program
    options = options.replace(onchip_bits=None, dma=None, min_tiles=None)   # tiling, when asked for, is _compile_tiled's
    if args.fuse == "none" or args.redundancy == "ignore" or args.iteration != "factored":
        return compile_program(src, options)
    from ..models import program_inputs
    from .redundancy import compile_checked
    unfused = compile_program(src, options.replace(fuse="none", order=None))
    data = program_inputs(unfused.program)[0]
    c = compile_checked(src, args.fuse, order=args.order, parallel=args.parallel, inputs=data,
                        rewrite=args.redundancy == "rewrite", passes=options.graph_options(), unfused=unfused)
    for r in c.redundancies:
        print(f"{'note' if r.action else 'warning'}: {r.line()}", file=sys.stderr)
    return c.result


def _on_top(rep):
    """The bits the depths report charges on top of its budget (deadlock floors, lanes), as text."""
    parts = [f"{rep[k]} of {what}" for k, what in (("floor_bits", "deadlock floors"), ("lane_bits", "lanes"))
             if rep.get(k)]
    return f" + {' + '.join(parts)} on top" if parts else ""


def _actions(src, result, args, seconds):
    """--check/--simulate/--report/--build/--rtl-sim, as for a PyTorch model (fuseflow.model_cli.run_actions)."""
    from ..cli import read_text
    from ..model import ff_model
    from ..model_cli import run_actions
    inputs = None
    if args.inputs:
        from ..samml.sample import load_files
        inputs = load_files(args.inputs)
    m = ff_model(src, read_text(args.program), result, fuse=args.fuse, mode=args.mode, example_inputs=inputs,
                 compile_seconds=seconds)
    return run_actions(m, args)


def _print_intermediate_densities(program):
    """The cost model's density estimate of every level of every intermediate (inputs at their declared
    densities, undeclared ones 1.0), beside the formats the compiler chose (``--dump-table``)."""
    from .cost import estimate, level_densities
    inter = [t for t in program.tensors.values() if t.role == "intermediate"]
    if not inter:
        return
    try:
        est = estimate(program, {t.name: t.density for t in program.inputs if t.density is not None})
    except Exception as exc:  # noqa: BLE001 (a report line, never a failure)
        print(f"intermediate formats: no cost estimate ({exc})")
        return
    written = {name: pos for k in est.kernels for name, pos in k.get("written", {}).items()}
    for t in inter:
        if t.name not in written:
            continue
        dens = level_densities(t, written[t.name])
        print(f"intermediate {t.name}: levels " + ", ".join(
            f"{fmt} (estimated density {d:.3g})" for fmt, d in zip(t.levels, dens)))


def render_depths(rep):
    """The depths pass's report as a table (``--dump-table``)."""
    lines = [f"channel depths: {rep['total_bits']} FIFO bits, a budget of {rep['budget_bits']}{_on_top(rep)}"
             + (" (OVER BUDGET: the channels at their floors and the default depth alone exceed it)"
                if rep["over_budget"] else "")
             + f", default depth {rep['default_depth']}, crd_width {rep['crd_width']}"]
    if rep.get("trimmed"):
        lines.append(f"  {rep['trimmed']} channel(s) got less than they asked for (marked '<', the depth it asked "
                     f"for after it; every one keeps it from --fifo-budget {rep['full_budget_bits']})")
    prof = rep.get("profile")
    if prof:
        lines.append("  profile on synthetic inputs: " + ", ".join(f"{k} {v}" for k, v in prof.items()))
    lines.append(f"  {'kernel':12s} {'stream':32s} {'kind':6s} {'depth':>5s} {'cons':>4s} {'bits':>6s}  why")
    for r in rep["channels"]:
        short = f"  < {r['wanted']}" if r["depth"] < r.get("wanted", r["depth"]) else ""
        lines.append(f"  {r['kernel']:12s} {r['stream']:32s} {r['kind']:6s} {r['depth']:5d} {r['consumers']:4d} "
                     f"{r['bits']:6d}  {r['why']}{short}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main_guard(main, sys.argv[1:]))
