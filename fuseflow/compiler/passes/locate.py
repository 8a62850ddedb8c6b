"""The locate pass: co-iterate only the operands that must be iterated, locate into the dense ones.

``locate_pass(program, options) -> report`` rewrites every kernel of a SAMML program (in place): an ``intersect`` input that comes straight from a ``level_scan`` of a level that *can locate* (the level
format's capability, :func:`fuseflow.tensors.formats.can_locate`: dense levels) is removed from the
intersection, and its references are computed by a ``locate`` node from the scanner's parent references and
the coordinates of the remaining inputs::

    intersect(crd0 = B_j.crd, ref0 = B_j.ref, crd1 = scan_c.crd, ref1 = scan_c.ref)
      -> crd = B_j.crd, ref0 = B_j.ref, ref1 = locate(ref = <scan_c's input>, crd = B_j.crd)

A dense level intersected with a fibre of the same dimension contributes every coordinate, so the
intersection is the other inputs' intersection (the same tokens), and the located reference ``r*d + c`` is the
one the dense scanner would have paired with ``c``. The work then scales with the nonzeros of the compressed
operands, not with the dense dimension. When every input can locate, the first stays a scan (something must
iterate). Unions are left alone (a union visits every coordinate of a dense operand anyway), except one that
is only its dense operands: a union with a scan of a dense level (parent references never ``N``) emits every
coordinate, and when nobody reads the references of its other inputs it *is* its dense scans (each with every
coordinate, so the references of each are its own). Such a union is replaced by its dense scans first, which
an intersection then locates. Full fusion makes these: a fused
``adj(i,k) * relu(adj(k,l) X(l,j) + b(j))`` covers ``k`` for the bias with a union of the inner ``adj``'s
dense row level and the outer row, so every row of the outer ``adj`` would scan all ``n`` inner rows.

A scanner is located only when nothing else reads its streams, and when its parent references can never be
``N`` (a union upstream): a dense scan of ``N`` is an empty fibre, which empties the intersection, while a
located ``N`` would keep the other side's coordinates (with zero values) and change the written tensor.
"""

from __future__ import annotations

from ...tensors.formats import can_locate
from ...samml.graph import Kernel, PortRef, Program

__all__ = ["locate_pass", "locate_kernel"]


def locate_pass(program: Program, options=None) -> dict:
    """Apply :func:`locate_kernel` to every kernel of ``program`` (the ``locate`` stage; ``--skip locate`` keeps
    the scans). Returns ``{"located": number of locate nodes added}``."""
    return {"located": sum(locate_kernel(program, kernel) for kernel in program.kernels)}


def locate_kernel(program: Program, kernel: Kernel) -> int:
    """Locate into every locatable intersect input of ``kernel``; returns the number of locate nodes added."""
    added = 0
    for nid in [n for n, node in kernel.nodes.items() if node.op == "union"]:
        _collapse_covered_union(program, kernel, nid)
    for nid in [n for n, node in kernel.nodes.items() if node.op == "intersect"]:
        added += _locate_intersect(program, kernel, nid)
    return added


def _covering_inputs(program, kernel, nid):
    """The inputs of union ``nid`` that are scans of a dense level whose parent references are never ``N`` and
    whose streams only the union reads (each holds every coordinate: the union's coordinates are theirs), as
    {input: scan node}, when the union's references read downstream are theirs only; else {}."""
    node = kernel.nodes[nid]
    found = {}
    for i in range(node.params["arity"]):
        crd, ref = kernel.driver(nid, f"crd{i}"), kernel.driver(nid, f"ref{i}")
        if crd is None or ref is None or crd.src.node != ref.src.node:
            continue
        scan = kernel.nodes[crd.src.node]
        if scan.op != "level_scan" or crd.src.port != "crd" or ref.src.port != "ref":
            continue
        fmt, dim = _level_format(program, scan)
        if not can_locate(fmt) or dim is None:
            continue
        if crd.dsts != [PortRef(nid, f"crd{i}")] or ref.dsts != [PortRef(nid, f"ref{i}")]:
            continue
        parent = kernel.driver(scan.id, "ref")
        if parent is None or _may_be_empty(kernel, parent):
            continue
        found[i] = scan
    if any(kernel.output_stream(nid, f"ref{j}") is not None
           for j in range(node.params["arity"]) if j not in found):
        return {}                         # another input's references (or N) are read downstream
    return found


def _collapse_covered_union(program, kernel, nid):
    """Replace union ``nid`` by its covering inputs (:func:`_covering_inputs`): its references by theirs, its
    coordinates, where an intersect input pairs them with a covering input's references, by that input's (so
    the pair stays one scanner's, which the intersect can locate), elsewhere by the first one's. True if it
    did."""
    found = _covering_inputs(program, kernel, nid)
    if not found:
        return False
    first = found[min(found)]
    ref_of = {}                           # consumer (node, port) of a union ref -> covering input
    outs = {}
    for port in ["crd"] + [f"ref{i}" for i in found]:
        s = kernel.output_stream(nid, port)
        if s is not None:
            outs[port] = (list(s.dsts), s.depth)
            if port != "crd":
                for d in s.dsts:
                    ref_of[(d.node, d.port)] = int(port[3:])
    for sid in list(kernel.streams):
        s = kernel.streams[sid]
        if s.src.node == nid:
            del kernel.streams[sid]
            continue
        s.dsts = [d for d in s.dsts if d.node != nid]
    del kernel.nodes[nid]
    for sid in [sid for sid, st in kernel.streams.items() if not st.dsts]:
        del kernel.streams[sid]           # the union's inputs' streams that only it read
    kernel._reindex()
    for port, (dsts, depth) in outs.items():
        for d in dsts:
            if port == "crd":
                paired = None
                if kernel.nodes[d.node].op == "intersect" and d.port.startswith("crd"):
                    paired = ref_of.get((d.node, "ref" + d.port[3:]))
                src = PortRef(found[paired].id if paired is not None else first.id, "crd")
            else:
                src = PortRef(found[int(port[3:])].id, "ref")
            kernel.connect(src, d.node, d.port)
            s = kernel.output_stream(src.node, src.port)
            if depth is not None and (s.depth or 0) < depth:
                s.depth = depth
    return True


def _level_format(program, node):
    """The format of the level a level_scan reads (the tensor's declaration wins over the parameter)."""
    name = node.params.get("tensor")
    if name is not None and name in program.tensors:
        t = program.tensors[name]
        return t.levels[node.params.get("level", 0)], t.level_dim(node.params.get("level", 0))
    return node.params.get("format", "compressed"), node.params.get("dim")


def _locatable_scan(program, kernel, nid, i):
    """The level_scan feeding input ``i`` of intersect ``nid`` if it can be located, else None."""
    crd, ref = kernel.driver(nid, f"crd{i}"), kernel.driver(nid, f"ref{i}")
    if crd is None or ref is None or crd.src.node != ref.src.node:
        return None
    scan = kernel.nodes[crd.src.node]
    if scan.op != "level_scan" or crd.src.port != "crd" or ref.src.port != "ref":
        return None
    fmt, dim = _level_format(program, scan)
    if not can_locate(fmt) or dim is None:
        return None
    if crd.dsts != [PortRef(nid, f"crd{i}")] or ref.dsts != [PortRef(nid, f"ref{i}")]:
        return None                       # something else reads the scanner's streams
    parent = kernel.driver(scan.id, "ref")
    if parent is None or _may_be_empty(kernel, parent):
        return None
    return scan, int(dim), parent


def _may_be_empty(kernel, stream, _seen=None):
    """Whether reference stream ``stream`` may carry ``N`` (only a union makes one; the ops that pass a
    reference through pass it on)."""
    node = kernel.nodes[stream.src.node]
    if node.op in ("root", "level_scan"):
        return False
    through = {"repeat": "in", "locate": "ref"}.get(node.op)
    if node.op == "intersect":
        through = stream.src.port            # ref{i} passes input ref{i}
    if through is None:
        return True
    up = kernel.driver(node.id, through)
    return up is None or _may_be_empty(kernel, up)


def unique_node_id(kernel, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first that names no node of ``kernel``."""
    nid, n = base, 1
    while nid in kernel.nodes:
        nid = f"{base}_{n}"
        n += 1
    return nid


def _locate_intersect(program, kernel, nid):
    node = kernel.nodes[nid]
    arity = node.params["arity"]
    found = {i: _locatable_scan(program, kernel, nid, i) for i in range(arity)}
    located = [i for i in range(arity) if found[i] is not None]
    if not located:
        return 0
    if len(located) == arity:
        located = located[1:]             # every input can locate: the first one iterates
    kept = [i for i in range(arity) if i not in located]
    kept_in = [(kernel.driver(nid, f"crd{i}").src, kernel.driver(nid, f"ref{i}").src) for i in kept]
    # the intersect's consumers, per output port: (consumers, depth)
    outs = {}
    for port in ["crd"] + [f"ref{i}" for i in range(arity)]:
        s = kernel.output_stream(nid, port)
        if s is not None:
            outs[port] = (list(s.dsts), s.depth)
            del kernel.streams[s.id]
    # detach the intersect and the located scanners
    gone = {nid} | {found[i][0].id for i in located}
    for sid in list(kernel.streams):
        s = kernel.streams[sid]
        if s.src.node in gone:
            del kernel.streams[sid]
            continue
        s.dsts = [d for d in s.dsts if d.node not in gone]
    for g in gone:
        del kernel.nodes[g]
    kernel._reindex()
    # what is left of the intersection
    if len(kept) >= 2:
        inputs = {}
        for j, (c, r) in enumerate(kept_in):
            inputs[f"crd{j}"], inputs[f"ref{j}"] = c, r
        h = kernel.add("intersect", inputs, id=nid, arity=len(kept))
        crd_src = h["crd"]
        ref_src = {i: h[f"ref{j}"] for j, i in enumerate(kept)}
    else:
        crd_src = kept_in[0][0]
        ref_src = {kept[0]: kept_in[0][1]}
    for i in located:
        scan, dim, parent = found[i]
        base = scan.id.replace("scan", "locate", 1) if "scan" in scan.id else f"locate_{scan.id}"
        params = {"dim": dim}
        if scan.params.get("tensor") is not None:
            params.update(tensor=scan.params["tensor"], level=scan.params.get("level", 0))
        h = kernel.add("locate", {"ref": parent.src, "crd": crd_src}, id=unique_node_id(kernel, base), **params)
        ref_src[i] = h["ref"]
    for port, (dsts, depth) in outs.items():
        src = crd_src if port == "crd" else ref_src[int(port[3:])]
        for d in dsts:
            kernel.connect(src, d.node, d.port)
        s = kernel.output_stream(src.node, src.port)
        if depth is not None and (s.depth or 0) < depth:
            s.depth = depth
    # a kept input's stream that only the intersect read (a mask_scan's references) is left unconnected:
    # an output nobody reads (the simulator and the RTL take its tokens), not a dangling stream
    unread = [sid for sid, st in kernel.streams.items() if not st.dsts]
    for sid in unread:
        del kernel.streams[sid]
    if unread:
        kernel._reindex()
    return len(located)
