"""What per-stream widths save (issue 9 item 4): FIFO bits, memory bits and, with ``--synth``, Yosys' LUTs and
flip-flops (synthesis only, ECP5-85F, no place and route) of two kernel tops with 24-bit coordinates:

- ``spmv_2500``: the suite's SpMV, ``kernels.spmv(2500, 2500, "csr", density=0.05)`` (B's capacity 314,696:
  its positions need 24 bits, its coordinates 12);
- ``gcn_5000``: the fused GCN layer (fuseflow/programs/gcn.ff) at n = 5000, 16 features, A CSR at density
  0.001 (X's 80,000 positions need 24 bits).

Both are built without data (their declared capacities) and without probes, as ``benchmarks/synth_bench.py``
builds kernel tops. The same script measures the code before the change (run it with ``PYTHONPATH`` on a
checkout of that code, ``--label before``) and after (``--label after``); each run replaces its label's entry
in the results file (default ``benchmarks/results/widths.json``).

FIFO bits: the sum over channels of depth x token bits (data field + ctrl), as the build's manifest lists them;
memory bits: depth x width over the tensor memories (index: the seg/crd arrays).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import commit  # noqa: E402

GCN = """program gcn
tensor A(5000, 5000) : csr density 0.001
tensor X(5000, 16) : dense
tensor W(16, 16) : dense
fuse {
  T(i,j) = A(i,k) * X(k,j)
  H(i,h) = relu(T(i,j) * W(j,h))
}
"""


def designs():
    from fuseflow.compiler import compile_text
    from fuseflow.samml import kernels
    return {"spmv_2500": lambda: kernels.spmv(2500, 2500, "csr", density=0.05),
            "gcn_5000": lambda: compile_text(GCN).program}


def measure(program, synth=False) -> dict:
    from fuseflow.hw.elaborate import build
    b = build(program, probes=False)
    chans = [c for cs in b.top.channels for c in cs]
    index = [c for c in chans if c.kind != "val"]
    mems = b.plan.memories
    streams = {}
    for c in index:
        streams[str(c.width - 1)] = streams.get(str(c.width - 1), 0) + 1
    out = {
        "crd_width": int(program.config.get("crd_width", 16)),
        "channels": len(chans),
        "fifo_bits": sum(c.width * c.depth for c in chans),
        "index_fifo_bits": sum(c.width * c.depth for c in index),
        "index_channels_by_width": dict(sorted(streams.items())),
        "memory_bits": sum(m.depth * m.width for m in mems),
        "index_memory_bits": sum(m.depth * m.width for m in mems if m.array != "vals"),
        "index_memories": {m.name: m.width for m in mems if m.array != "vals"},
    }
    if synth:
        from fuseflow.boards.synth import yosys_resources
        res = yosys_resources(b.top, program.name, "ecp5-85f", timeout=6 * 3600)
        out["synth"] = {k: res[k] for k in ("luts", "ffs", "brams", "dsps", "seconds")}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, help="the entry to write (e.g. before, after)")
    ap.add_argument("--synth", action="store_true", help="also run Yosys (synthesis only; slow)")
    ap.add_argument("--only", action="append", help="design name (repeatable; default: all)")
    ap.add_argument("-o", "--output", default=os.path.join(os.path.dirname(__file__), "results", "widths.json"))
    ap.add_argument("--commit", default=None, help="the commit measured (default: this checkout's HEAD)")
    args = ap.parse_args(argv)
    rows = {}
    for name, make in designs().items():
        if args.only and name not in args.only:
            continue
        t0 = time.monotonic()
        rows[name] = measure(make(), args.synth)
        rows[name]["seconds"] = round(time.monotonic() - t0, 1)
        print(name, json.dumps(rows[name]), flush=True)
    doc = json.loads(open(args.output).read()) if os.path.exists(args.output) else {}
    entry = doc.setdefault(args.label, {"designs": {}})
    entry["commit"] = args.commit or commit()
    entry["designs"].update(rows)
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, args.output)


if __name__ == "__main__":
    sys.exit(main())
