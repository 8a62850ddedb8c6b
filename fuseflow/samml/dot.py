"""DOT and SVG pictures of a program: one cluster per kernel, nodes by op, edges coloured by stream kind."""

import shutil
import subprocess

from ..errors import FuseFlowError

KIND_COLOURS = {"crd": "#1f77b4", "ref": "#2ca02c", "val": "#d62728", "repsig": "#9467bd"}
OP_SHAPES = {"root": "circle", "level_scan": "box", "array": "box3d", "level_write": "cylinder",
             "value_write": "cylinder", "intersect": "invtrapezium", "union": "invtrapezium",
             "alu": "ellipse", "reduce": "invtriangle", "spacc": "invtriangle", "locate": "box"}


def _arity(p):
    return [f"x{p['arity']}"] if p.get("arity", 2) != 2 else []


#: what a node's label shows after its tensor, by op (a function of its parameters)
OP_LABELS = {"level_scan": lambda p: [p.get("format", "")], "locate": lambda p: [f"dim {p['dim']}"],
             "alu": lambda p: [p["op"] + (f" {p['const']}" if p.get("const") is not None else "")],
             "intersect": _arity, "union": _arity, "spacc": lambda p: [f"order {p['order']}"]}


def _label(node):
    p = node.params
    bits = [node.op]
    if "tensor" in p and p["tensor"]:
        leveled = any(q.name == "level" for q in node.spec.params)      # the ops that address one level
        bits.append(f"{p['tensor']}" + (f"[{p['level']}]" if leveled else ""))
    bits += OP_LABELS.get(node.op, lambda p: [])(p)
    return "\\n".join([node.id] + [b for b in bits[1:] if b]) if node.id != node.op else "\\n".join(bits)


def to_dot(program):
    """DOT text for ``program``."""
    lines = [f'digraph "{program.name}" {{', '  rankdir=TB; node [fontname="Helvetica" fontsize=10];',
             '  edge [fontname="Helvetica" fontsize=8];']
    if program.expr:
        lines.append(f'  labelloc=t; label="{program.name}: {program.expr}";')
    for ki, k in enumerate(program.kernels):
        prefix = f"k{ki}_"
        lines.append(f'  subgraph "cluster_{ki}" {{ label="{k.name}"; style=rounded;')
        for node in k.nodes.values():
            lines.append(f'    "{prefix}{node.id}" [label="{node.op}\\n{_label(node)}" '
                         f'shape={OP_SHAPES.get(node.op, "box")}];')
        lines.append("  }")
        for s in k.streams.values():
            for d in s.dsts:
                lines.append(f'  "{prefix}{s.src.node}" -> "{prefix}{d.node}" [color="{KIND_COLOURS[s.kind]}" '
                             f'label="{s.src.port}>{d.port}" fontcolor="{KIND_COLOURS[s.kind]}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(program, renderer="auto"):
    """SVG text: graphviz's ``dot`` when installed, else a layered drawing made with matplotlib.

    ``renderer``: "auto", "graphviz" (error if missing) or "matplotlib"."""
    dot = shutil.which("dot")
    if renderer == "matplotlib" or (renderer == "auto" and dot is None):
        return _svg_matplotlib(program)
    if dot is None:
        raise FuseFlowError("graphviz", "'dot' is not on PATH: install graphviz (e.g. apt-get install graphviz) "
                                        "or use the matplotlib renderer")
    proc = subprocess.run([dot, "-Tsvg"], input=to_dot(program), capture_output=True, text=True)
    if proc.returncode != 0:
        raise FuseFlowError("graphviz", proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "dot failed")
    return proc.stdout


def has_graphviz():
    return shutil.which("dot") is not None


def _svg_matplotlib(program, fmt="svg"):
    """Layered drawing: kernels side by side, nodes by topological generation, edges coloured by kind."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    pos, labels, edges = {}, {}, []
    x0 = 0.0
    max_depth = 1
    for ki, k in enumerate(program.kernels):
        g = k.graph()
        gens = list(nx.topological_generations(g))
        width = max((len(gen) for gen in gens), default=1)
        for depth, gen in enumerate(gens):
            for j, nid in enumerate(sorted(gen)):
                key = (ki, nid)
                pos[key] = (x0 + j + (width - len(gen)) / 2, -depth)
                labels[key] = f"{nid}\n{k.nodes[nid].op}"
        max_depth = max(max_depth, len(gens))
        for s in k.streams.values():
            for d in s.dsts:
                edges.append(((ki, s.src.node), (ki, d.node), KIND_COLOURS[s.kind]))
        x0 += width + 1
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * x0), max(3, 1.1 * max_depth)))
    for a, b, colour in edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ax.annotate("", xy=(xb, yb + 0.18), xytext=(xa, ya - 0.18),
                    arrowprops=dict(arrowstyle="->", color=colour, lw=1.0, connectionstyle="arc3,rad=0.08"))
    for key, (x, y) in pos.items():
        ax.text(x, y, labels[key], ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round,pad=0.3", fc="#f5f5f5", ec="#555555", lw=0.6))
    for kind, colour in KIND_COLOURS.items():
        ax.plot([], [], color=colour, label=kind)
    ax.legend(loc="upper right", fontsize=7, title="stream kind", title_fontsize=7)
    title = program.name + (f": {program.expr}" if program.expr else "")
    ax.set_title(title, fontsize=9)
    ax.set_xlim(-1, x0)
    ax.set_ylim(-max_depth, 1)
    ax.axis("off")
    buf = io.StringIO()
    if fmt != "svg":
        raw = io.BytesIO()
        fig.savefig(raw, format=fmt, bbox_inches="tight", dpi=110)
        plt.close(fig)
        return raw.getvalue()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
