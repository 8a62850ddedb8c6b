"""``python -m fuseflow.compiler``: compile ``.ff`` programs to SAMML ``graph.json``.

    python -m fuseflow.compiler compile prog.ff -o out/ [--fuse none|regions|full] [--order [KERNEL=]i,k,j ...]
                                         [--list-orders] [--max-orders N] [--dump-table]
                                         [--iteration factored|global]

Writes ``out/graph.json`` (and ``out/graph.svg`` when graphviz's ``dot`` is installed). ``--list-orders``
prints every valid dataflow order of every kernel (capped at ``--max-orders``), ``--dump-table`` the
fusion tables. Bad programs give ``error: <what>: <why>`` on one line and exit status 2.
"""

import argparse
import os
import sys

from ..cli import main_guard
from ..errors import ProgramError
from . import SCHEDULES, compile_program, parse_file
from .fusion import DEFAULT_MAX_ORDERS, KernelPlan


def parser():
    ap = argparse.ArgumentParser(prog="python -m fuseflow.compiler", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile a .ff program to graph.json")
    c.add_argument("program", help="the .ff source file")
    c.add_argument("-o", "--output", help="output directory (graph.json is written there)")
    c.add_argument("--fuse", default="regions", choices=SCHEDULES,
                   help="fusion granularity: none (one kernel per statement), regions (the program's fuse { } "
                        "regions; default), full (everything fused)")
    c.add_argument("--order", action="append",
                   help="dataflow order, outer to inner: i,k,j (every kernel uses the indices it has), or "
                        "KERNEL=i,k,j for one kernel (repeat for several; --list-orders prints them so)")
    c.add_argument("--list-orders", action="store_true", help="print every valid dataflow order of each kernel")
    c.add_argument("--max-orders", type=int, default=DEFAULT_MAX_ORDERS,
                   help=f"cap for --list-orders (default {DEFAULT_MAX_ORDERS})")
    c.add_argument("--dump-table", action="store_true", help="print the fusion table of each kernel")
    c.add_argument("--iteration", default="factored", choices=("factored", "global"),
                   help="factored iteration (default) or one global iteration space per kernel (for comparison)")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    if args.cmd == "compile":
        return compile_cmd(args)
    return 0


def compile_cmd(args):
    if not (args.output or args.list_orders or args.dump_table):
        raise ProgramError("arguments", "nothing to do: give -o OUT (and/or --list-orders, --dump-table)")
    if args.max_orders < 1:
        raise ProgramError("--max-orders", "must be at least 1")
    src = parse_file(args.program)
    result = compile_program(src, fuse=args.fuse, order=args.order, iteration=args.iteration)
    if args.list_orders:
        for p in result.plans:
            if not isinstance(p, KernelPlan):
                how = "cheap" if p.cheap else "general"
                print(f"kernel {p.name}: transpose {p.src} -> {p.dst} (mode order "
                      f"{','.join(map(str, p.dst_mode_order))}, {how} kernel; no dataflow order)")
                continue
            orders, capped = p.orders(args.max_orders)
            more = f" (capped at {args.max_orders}; more may exist, raise --max-orders)" if capped else ""
            print(f"kernel {p.name}: {p.describe()}")
            print(f"  {len(orders)} valid dataflow order{'s' if len(orders) != 1 else ''}{more}")
            if orders:
                print(f"  (give one back with --order {p.out}={','.join(orders[0])})")
            for o in orders:
                print(f"    {','.join(o)}" + ("   (selected)" if tuple(o) == tuple(p.order) else ""))
    if args.dump_table:
        for p in result.plans:
            if isinstance(p, KernelPlan):
                t = result.tables[p.name]
                print(t.render(f"fusion table of kernel {p.name}, order {','.join(p.order)}: {p.describe()}"))
                for n in p.notes:
                    print(f"  note: {n}")
    if args.output:
        from ..samml import save
        os.makedirs(args.output, exist_ok=True)
        path = os.path.join(args.output, "graph.json")
        save(result.program, path)
        msg = f"wrote {path}: {len(result.program.kernels)} kernel(s), " \
              f"{sum(len(k.nodes) for k in result.program.kernels)} nodes"
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
        print(msg, file=sys.stderr if (args.list_orders or args.dump_table) else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main, sys.argv[1:]))
