"""``fuseflow samml``: validate graph.json, list the tensors it takes, make sample inputs for it, draw it, write the
example kernel suite and the op reference."""

import argparse
import os
import sys

from ..cli import atomic_write, describe, main_guard, nonnegative_int, output_dir, output_file
from .sample import DEFAULT_SEED, density


def parser():
    ap = argparse.ArgumentParser(prog="fuseflow samml", description=describe(__doc__))
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="check graph.json against the schema and the op registry")
    v.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    d = sub.add_parser("dot", help="draw a graph as DOT or SVG (SVG needs graphviz's dot)")
    d.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    d.add_argument("-o", "--output", type=output_file, help="output file (.dot or .svg); default: DOT on stdout")
    k = sub.add_parser("kernels", help="write the classic kernel suite as graph.json files")
    k.add_argument("-o", "--output", default="examples/kernels", type=output_dir,
                   help="directory for the kernels' graph.json files (default: examples/kernels)")
    k.add_argument("--svg", action="store_true", help="also write graph.svg (needs graphviz)")
    i = sub.add_parser("info", help="the tensors a graph takes and makes: names, roles, shapes and formats")
    i.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    n = sub.add_parser("random", help="write random input tensors for a graph to an .npz file (sample data for "
                                      "--inputs)")
    n.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    n.add_argument("-o", "--output", required=True, type=output_file, metavar="NPZ",
                   help="the .npz file to write (one array or SciPy sparse matrix per input tensor)")
    n.add_argument("--density", type=density, default=0.5,
                   help="fraction of nonzeros of the sparse-format inputs (default 0.5; dense-format ones are full)")
    n.add_argument("--seed", type=nonnegative_int, default=DEFAULT_SEED,
                   help=f"random seed (default {DEFAULT_SEED}, the default of --data-seed)")
    sub.add_parser("ops", help="list the ops of the registry")
    r = sub.add_parser("reference", help="write the op reference generated from the registry (make docs: "
                                         "docs/reference/ops.md)")
    r.add_argument("-o", "--output", type=output_file,
                   help="output file (docs/reference/ops.md in the repository); default: Markdown on stdout")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    if args.cmd in ("validate", "dot", "kernels", "info", "random"):
        from . import io                    # after parsing: --help does not load jsonschema and networkx
    if args.cmd in ("dot", "kernels"):
        from .dot import to_dot, to_svg
    if args.cmd == "validate":
        p = io.load(args.graph)
        print(f"{args.graph}: valid SAMML program '{p.name}': {len(p.kernels)} kernel(s), "
              f"{sum(len(k.nodes) for k in p.kernels)} nodes, {sum(len(k.streams) for k in p.kernels)} streams")
    elif args.cmd == "dot":
        p = io.load(args.graph)
        if args.output and args.output.endswith(".svg"):
            from .dot import has_graphviz
            if not has_graphviz():
                print("note: graphviz 'dot' not found; drawing the SVG with matplotlib instead "
                      "(install graphviz for a graphviz layout)", file=sys.stderr)
            text = to_svg(p)
        else:
            text = to_dot(p)
        if args.output:
            with atomic_write(args.output) as f:
                f.write(text)
            print(f"wrote {args.output}")
        else:
            sys.stdout.write(text)
    elif args.cmd == "kernels":
        from .kernels import SUITE, build
        for name in SUITE:
            prog = build(name)
            path = os.path.join(args.output, name, "graph.json")
            io.save(prog, path)
            if args.svg:
                with atomic_write(os.path.join(args.output, name, "graph.svg")) as f:
                    f.write(to_svg(prog))
            print(f"wrote {path}")
    elif args.cmd == "info":
        from .sample import describe as describe_graph
        print("\n".join(describe_graph(io.load(args.graph))))
    elif args.cmd == "random":
        from ..tensors.io import save_npz
        from .sample import for_file, random_data
        p = io.load(args.graph)
        data = random_data(p, args.density, args.seed)
        save_npz(args.output, for_file(p, data))
        print(f"wrote {args.output}: " + ", ".join(f"{name} {tuple(getattr(a, 'shape', ()))}" for name, a in data.items())
              + f" (density {args.density:g}, seed {args.seed})")
    elif args.cmd == "ops":
        from .registry import OPS
        for spec in OPS.values():
            print(f"{spec.name:12s} {spec.doc}")
    elif args.cmd == "reference":
        from .reference import render
        text = render()
        if args.output:
            with atomic_write(args.output) as f:
                f.write(text)
            print(f"wrote {args.output}")
        else:
            sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
