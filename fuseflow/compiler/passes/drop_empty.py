"""The drop-empty pass: a CSR-style operand's empty rows never enter the rest of the graph.

A dense level over a compressed one (CSR's rows) visits every row, empty or not. An empty row still sends its
stops through every op below it (its repeats, locates, sparse accumulators and writers), a few cycles each, so
a kernel over a CSR matrix costs cycles in the number of rows, not only in the nonzeros. When the rest of the
graph provably produces nothing for an empty row, the pass puts a ``crd_drop`` (with the compressed level's
references aligned, ``arity`` 1) right after the two scanners::

    scan_A_i (dense) -> crd  -> repeat_sig, drop_H0.outer        scan_A_i.crd  -> drop_A_i.outer -> (same)
                     -> ref  -> scan_A_k (compressed)      ==>   scan_A_k.crd  -> drop_A_i.inner -> (same)
    scan_A_k -> crd, ref -> (consumers)                          scan_A_k.ref  -> drop_A_i.ref0  -> (same)

so the row coordinates, the repeats they drive and the compressed level's fibres skip the empty rows.

When is that safe? The pass applies only when

1. the dense scanner's references go to the compressed scanner alone (nothing else iterates below a row), and
   its coordinates go only to ``repeat_sig`` nodes (which repeat other operands once per row) and to the outer
   input of ``crd_drop`` nodes (the output's own empty-row drop), so no op needs every row (a reducer that
   gives each row a value, a dense writer, a union over the rows);
2. an empty row leaves nothing below it: every value written and every inner input of those ``crd_drop``
   nodes is *dominated* by the compressed level, i.e. is empty in a row whose compressed fibre is empty. The
   rule is computed op by op from the registry's semantics: a scan, locate, repeat, array, reduce or mask of a
   dominated stream is dominated; an ``alu`` or intersection with one dominated operand is; a union only when
   every input is (``H(i,h) = A(i,k) X(k,h) + b(h)`` keeps ``b`` in an empty row of ``A``: no drop);
3. the output's levels are written only from those ``crd_drop`` nodes (the output drops its empty rows
   anyway; a dense output level or a deeper chain of drops is left alone);
4. and it pays: a level is scanned below the row (a located dense fibre, another operand's row), so each
   nonzero of the row fans out into several tokens further down. ``crd_drop`` costs one cycle per kept row
   (the held ``S0``); that is hidden when the stream it filters is a fraction of the busiest one, and not when
   the row's nonzeros are the busiest stream (SpMV into a sparse vector: 91 cycles instead of 85 with few
   empty rows), so those graphs are left alone.

The output is then the same tensor: the rows the pass drops are the rows the output's ``crd_drop`` dropped.
"""

from __future__ import annotations

from ...tensors.formats import COMPRESSED, can_locate
from ...samml.graph import Kernel, PortRef, Program
from .locate import unique_node_id

__all__ = ["drop_empty_pass", "drop_empty_kernel", "dominated_streams"]


def drop_empty_pass(program: Program, options=None) -> dict:
    """Apply :func:`drop_empty_kernel` to every kernel (the ``drop_empty`` stage; ``--skip drop_empty`` keeps the
    empty rows). Returns ``{"dropped": number of crd_drop nodes added}``."""
    return {"dropped": sum(drop_empty_kernel(program, k) for k in program.kernels)}


def _level(program, node):
    name = node.params.get("tensor")
    if name is None or name not in program.tensors:
        return node.params.get("format", "compressed")
    return program.tensors[name].levels[node.params.get("level", 0)]


def _row_pairs(program, kernel):
    """(dense scanner, compressed scanner) pairs of the same tensor, the dense one's references feeding only
    the compressed one."""
    for node in kernel.nodes.values():
        if node.op != "level_scan" or not can_locate(_level(program, node)):
            continue
        ref = kernel.output_stream(node.id, "ref")
        if ref is None or len(ref.dsts) != 1 or ref.dsts[0].port != "ref":
            continue
        inner = kernel.nodes[ref.dsts[0].node]
        if (inner.op == "level_scan" and _level(program, inner) == COMPRESSED
                and inner.params.get("tensor") == node.params.get("tensor")
                and inner.params.get("level", 0) == node.params.get("level", 0) + 1):
            yield node, inner


#: op -> (input ports of which one dominated stream suffices, input ports that must all be dominated)
_ANY = {"level_scan": ("ref",), "mask_scan": ("ref",), "locate": ("crd",), "repeat": ("repsig",),
        "repeat_sig": ("in",), "array": ("ref",), "alu": ("a", "b"), "crd_drop": ("inner",),
        "crd_hold": ("inner",), "crd_mask": ("crd",), "spacc": ("crd_inner", "val")}


def dominated_streams(kernel: Kernel, seeds) -> set:
    """Ids of the streams of ``kernel`` that are empty within a row whenever the streams ``seeds`` are (see the
    module doc, rule 2)."""
    import networkx as nx
    dom = set(seeds)
    for nid in nx.topological_sort(kernel.graph()):
        node = kernel.nodes[nid]
        ins = {port: s.id for port, s in ((p, kernel.driver(nid, p)) for p, _ in
                                          node.spec.input_ports(node.params)) if s is not None}
        if node.op in ("intersect", "union"):
            crds = [ins.get(f"crd{i}") for i in range(node.params["arity"])]
            hit = (any if node.op == "intersect" else all)(c in dom for c in crds)
        elif node.op == "reduce":
            hit = ins.get("crd", ins.get("val")) in dom
        else:
            hit = any(ins.get(p) in dom for p in _ANY.get(node.op, ()))
        if hit:
            for port, _ in node.spec.output_ports(node.params):
                s = kernel.output_stream(nid, port)
                if s is not None:
                    dom.add(s.id)
    return dom


def _safe(kernel, dense, comp):
    """Rules 1-3 of the module doc for the pair (dense scanner, compressed scanner)."""
    rows = kernel.output_stream(dense.id, "crd")
    if rows is None:
        return False
    drops = []
    for d in rows.dsts:
        op = kernel.nodes[d.node].op
        if op == "crd_drop" and d.port == "outer":
            drops.append(d.node)
        elif op != "repeat_sig":
            return False
    seeds = [s.id for s in (kernel.output_stream(comp.id, "crd"), kernel.output_stream(comp.id, "ref")) if s]
    dom = dominated_streams(kernel, seeds)
    for d in drops:
        inner = kernel.driver(d, "inner")
        if inner is None or inner.id not in dom or kernel.nodes[d].params.get("arity", 0):
            return False
    if not any(node.op in ("level_scan", "mask_scan") and getattr(kernel.driver(node.id, "ref"), "id", None) in dom
               for node in kernel.nodes.values()):
        return False                         # rule 4: nothing is scanned below the row (see the module doc)
    for node in kernel.nodes.values():
        if node.op == "value_write":
            s = kernel.driver(node.id, "val")
            if s is None or s.id not in dom:
                return False
        elif node.op == "level_write":
            s = kernel.driver(node.id, "crd")
            if s is None or s.src.node not in drops:
                return False
    return True


def drop_empty_kernel(program: Program, kernel: Kernel) -> int:
    """Insert a ``crd_drop`` after every (dense, compressed) scanner pair of ``kernel`` where it is safe;
    returns the number inserted."""
    added = 0
    for dense, comp in list(_row_pairs(program, kernel)):
        if not _safe(kernel, dense, comp):
            continue
        ports = {"outer": (dense.id, "crd"), "inner": (comp.id, "crd"), "ref0": (comp.id, "ref")}
        consumers = {}
        for port, (nid, out) in ports.items():
            s = kernel.output_stream(nid, out)
            if s is None:
                break
            consumers[port] = (list(s.dsts), s.depth)
            s.dsts, s.depth = [], None               # its depth served its old consumers: it moves with them
        else:
            kernel._reindex()
            base = dense.id.replace("scan", "drop", 1) if "scan" in dense.id else f"drop_{dense.id}"
            h = kernel.add("crd_drop", {p: PortRef(*src) for p, src in ports.items()},
                           id=unique_node_id(kernel, base), arity=1)
            for port, (dsts, depth) in consumers.items():
                for d in dsts:
                    kernel.connect(h[port], d.node, d.port)
                s = kernel.output_stream(h.id, port)
                if s is not None and depth is not None and (s.depth or 0) < depth:
                    s.depth = depth
            added += 1
            continue
        for port, (dsts, depth) in consumers.items():  # an output missing: leave the pair as it was
            nid, out = ports[port]
            st = kernel.output_stream(nid, out)
            st.dsts, st.depth = dsts, depth
        kernel._reindex()
    return added
