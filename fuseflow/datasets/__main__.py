"""``fuseflow datasets`` (``python -m fuseflow.datasets``): list the bundled graphs, describe any loadable one.

    fuseflow datasets list
    fuseflow datasets info cora
    fuseflow datasets info --planetoid data/planetoid citeseer
    fuseflow datasets info --ogb dataset/ogbn_arxiv [--split time]
    fuseflow datasets info --mtx graph.mtx | --snap edges.txt.gz | --npz graph.npz [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..cli import describe, main_guard, positive_int

if TYPE_CHECKING:
    from ..models.data import Graph


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fuseflow datasets", description=describe(__doc__.splitlines()[0]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the bundled datasets and their attribution")
    i = sub.add_parser("info", help="nodes, edges, features (nonzeros, density), classes and split of a graph")
    i.add_argument("source", nargs="?",
                   help="a bundled dataset (cora) or a path: an OGB or Planetoid directory, .npz, .mtx, or a SNAP "
                        "edge list (the kind is recognised from the path)")
    kind = i.add_mutually_exclusive_group()
    kind.add_argument("--planetoid", nargs=2, metavar=("ROOT", "NAME"),
                      help="Planetoid files ROOT/ind.NAME.{x,y,tx,ty,allx,ally,graph,test.index}")
    kind.add_argument("--ogb", metavar="ROOT", help="an OGB dataset directory as the ogb package leaves it (raw/, "
                                                    "split/)")
    kind.add_argument("--mtx", metavar="PATH", help="a Matrix Market adjacency (.mtx or .mtx.gz)")
    kind.add_argument("--snap", metavar="PATH", help="a SNAP edge list (text or .gz, '#' comments)")
    kind.add_argument("--npz", metavar="PATH", help="a graph saved by fuseflow.datasets.save_npz")
    i.add_argument("--split", help="OGB: which split/<name> to read when there are several")
    i.add_argument("--relation", help="OGB heterogeneous (ogbn-mag): the relation, e.g. paper___cites___paper")
    i.add_argument("--directed", action="store_true", help="keep edge directions (default: make the graph "
                                                           "undirected, as the GNN models expect)")
    i.add_argument("--self-loops", action="store_true", help="keep the data's self loops in the plain adjacency "
                                                             "(default: drop them; the GCN adds its own)")
    i.add_argument("--subgraph", type=positive_int, metavar="N",
                   help="describe the subgraph of N nodes reached breadth-first from node 0 instead")
    i.add_argument("--json", action="store_true", help="print the numbers as JSON")
    return ap


def _load(args: argparse.Namespace) -> Graph:
    from .. import datasets
    from ..cli import UsageError
    opts = dict(undirected=not args.directed, self_loops=args.self_loops)
    chosen = [k for k in ("planetoid", "ogb", "mtx", "snap", "npz") if getattr(args, k)]
    if args.source and chosen:
        raise UsageError("source", f"give a dataset name or path, or --{chosen[0]}, not both")
    if not args.source and not chosen:
        raise UsageError("source", f"give a bundled dataset ({', '.join(datasets.names())}) or a path, or one of "
                                   "--planetoid, --ogb, --mtx, --snap, --npz")
    if (args.split or args.relation) and not (args.ogb or args.source):
        raise UsageError("--split/--relation", "only for OGB datasets")
    ogb_opts = {k: v for k, v in (("split", args.split), ("relation", args.relation)) if v}
    if args.planetoid:
        return datasets.load_planetoid(args.planetoid[0], args.planetoid[1], **opts)
    if args.ogb:
        return datasets.load_ogb(args.ogb, **ogb_opts, **opts)
    if args.mtx:
        return datasets.load_mtx(args.mtx, **opts)
    if args.snap:
        return datasets.load_snap(args.snap, **opts)
    if args.npz or args.source.lower() in datasets.BUNDLED or args.source.lower().endswith(".npz"):
        if args.directed or args.self_loops:
            raise UsageError("--directed/--self-loops", "a .npz graph (and a bundled one) is read as stored")
        if ogb_opts:
            raise UsageError("--split/--relation", "only for OGB datasets")
        return datasets.load(args.npz or args.source)
    import os
    if ogb_opts and not os.path.isdir(os.path.join(args.source, "raw")):
        raise UsageError("--split/--relation", "only for OGB datasets")
    return datasets.load(args.source, **ogb_opts, **opts)


def _num(v: Any) -> str:
    return f"{v:,}"


def format_info(d: dict) -> str:
    """The ``info`` table of :func:`fuseflow.datasets.describe`'s numbers."""
    n = d["nodes"]
    kind = "undirected" if d["symmetric"] else "directed"
    lines = [f"{d['name']}: {d['source']}" if d["source"] else d["name"],
             f"  nodes      {_num(n)}",
             f"  edges      {_num(d['edges'])} {kind} ({_num(d['adjacency_entries'])} adjacency entries, "
             f"density {100 * d['adjacency_density']:.3g}%"
             + (f", {_num(d['self_loops'])} self loops" if d["self_loops"] else "") + ")",
             f"  degree     mean {d['degree_mean']:.2f}, max {_num(d['degree_max'])}, "
             f"{_num(d['isolated_nodes'])} isolated",
             f"  features   {_num(d['features'])} per node, {d['features_stored']}: {_num(d['feature_nonzeros'])} "
             f"nonzeros (density {100 * d['feature_density']:.3g}%)"]
    if d["classes"] is None:
        lines.append("  classes    none (no labels)")
    else:
        labelled = d["labelled_nodes"]
        lines.append(f"  classes    {d['classes']}" + (f" ({_num(labelled)} nodes labelled)" if labelled is not None
                                                      else ""))
    if d["split"]:
        lines.append("  split      " + ", ".join(f"{k} {_num(v)}" for k, v in d["split"].items()))
    else:
        lines.append("  split      none" + (f" ({d['split_note']})" if d.get("split_note") else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from .. import datasets
    if args.cmd == "list":
        for name in datasets.names():
            file, attribution = datasets.BUNDLED[name]
            print(f"{name:8s} {file}: {attribution}")
        return 0
    g = _load(args)
    if args.subgraph:
        g = g.subgraph(g.bfs(min(args.subgraph, g.nodes)))
    d = datasets.describe(g)
    print(json.dumps(d, indent=2) if args.json else format_info(d))
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
