"""Kernel suites of the correlation report: named lists of (name, Program, inputs).

``quick``   a handful of small kernels for the default test run: vector_add and spmspm_gustavson at their default
            sizes on three data sets each (the data sets of ``tests/hw/test_verilator.py``, so both share the same
            Verilator builds), and the compiled ``fuseflow/programs/spmv.ff``.
``default`` every classic kernel of :data:`fuseflow.samml.kernels.SUITE` at sizes 4, 8, 16 and 24 and densities
            0.1, 0.3 and 0.6, plus every ``fuseflow/programs/*.ff`` compiled at each fusion granularity
            (``none``, ``regions``, ``full``) on random data (density 0.3; dense operands full); the ML model
            examples (``decoder``, ``autoencoder``, ``graphsage2``) on model-scale data (:mod:`fuseflow.models`).
``parallel`` the example programs whose outermost index is ``i`` (:data:`PARALLEL_PROGRAMS`) compiled with
            ``parallel i 2`` and ``parallel i 4`` (docs/compiler.md, "Parallel lanes"), and the schedules of
            :data:`PARALLEL_SCHEDULES` (reductions over the parallelized index, an inner index, nested lanes), on
            random data.
``blocks``  block-sparse SpMV and SpMM (``bcsr:B`` operands, a ``bdv:B`` vector; issue #15) at B = 2 and 4 on
            block-sparse data (:data:`BLOCK_PROGRAMS`, :func:`blocked`), and BigBird attention blocked at B = 2
            (softmax across the blocks of a row; :data:`BLOCK_ATTENTION`, :func:`blocked_attention`); also part
            of ``default``.
``models``  the ML model examples alone, each at the granularity with the smallest design (:data:`MODEL_PROGRAMS`),
            on model-scale data: the models' correlation without the rest of ``default``.

Data are deterministic (fixed seeds). Each :class:`Entry` keeps what it is in ``meta`` (source, kernel, size,
density, seed, fusion) for the report's table.
"""

import glob
import os
from dataclasses import dataclass, field

from ..errors import FuseFlowError
from ..samml import kernels

#: sizes and densities of the classic kernels in the default suite
DEFAULT_SIZES = (4, 8, 16, 24)
DEFAULT_DENSITIES = (0.1, 0.3, 0.6)
#: classic kernels whose row level is large enough that its seg and first arrays go to block RAM
#: (fuseflow.samml.storage: the level_scan's bounds_latency 2), so the default suite checks that timing rule too:
#: (kernel, rows, density, seed)
LARGE_LEVELS = (("spmv_csr", 700, 0.003, 7), ("spmv_dcsr", 700, 0.003, 8))
#: fusion granularities of the compiler (fuseflow.compiler.SCHEDULES)
FUSIONS = ("none", "regions", "full")
#: density and seed of the compiled programs' random inputs
COMPILED_DENSITY = 0.3
COMPILED_SEED = 7
#: compiled programs with more nodes are left out of the suites (with a note)
MAX_COMPILED_NODES = 3000
#: the data sets of tests/hw/test_verilator.py (seed, density): the quick suite uses the same ones, so the
#: capacities it declares, the Verilog, and so the cached Verilator builds are the same
QUICK_DATASETS = ((1, 0.5), (2, 0.2), (3, 0.9))
QUICK_KERNELS = ("vector_add", "spmspm_gustavson")
QUICK_PROGRAMS = (("spmv.ff", "regions"),)
#: the ML model examples, each at the granularity with the fewest nodes (graphsage2: none and regions tie at 104;
#: autoencoder: full, 63; decoder: none, 403, where regions and full, the same graph between its barriers, have 575)
#: the parallel suite: programs (fuse regions) and lane counts of their outermost index i
PARALLEL_PROGRAMS = ("spmv.ff", "spmm.ff", "elementwise.ff", "gcn.ff")
#: the blocks suite: block-sparse programs ({n}: size, {b}: block size), block sizes, (seed, block density)
BLOCK_PROGRAMS = {
    "bspmv": "program bspmv\ntensor B({n}, {n}) : bcsr:{b}\ntensor c({n}) : bdv:{b}\nx(i) = B(i,j) * c(j)\n",
    "bspmm": "program bspmm\ntensor A({n}, {n}) : bcsr:{b}\ntensor B({n}, {n}) : bcsr:{b}\n"
             "X(i,j) = A(i,k) * B(k,j)\n",
}
#: BigBird attention, blocked ({n}: sequence length, {d}: head size, {b}: block size): scores over a block mask
#: tensor, softmax across the blocks of a row, times V
BLOCK_ATTENTION = ("program battention\ntensor M({n}, {n}) : bcsr:{b}\ntensor Q({n}, {d}) : bcsr:{b}\n"
                   "tensor KT({d}, {n}) : bcsr:{b}\ntensor V({n}, {d}) : bcsr:{b}\n"
                   "S(i,j) = M(i,j) * sum[d](Q(i,d) * KT(d,j))\nP(i,j) = softmax[j](S(i,j))\n"
                   "O(i,e) = sum[j](P(i,j) * V(j,e))\n")
#: (block size, sequence length, head size, seed) of the suite's attention entries
BLOCK_ATTENTION_CASES = ((2, 16, 4, 1),)
BLOCK_SIZES = (2, 4)
BLOCK_GRID = 4                     # block rows/columns per matrix (n = 4 B)
BLOCK_DATASETS = ((1, 0.5), (2, 0.25))
PARALLEL_FACTORS = (2, 4)
#: more schedules of the parallel suite: a sum over i on i's lanes (reductions.ff), SpMSpM's spacc over its inner
#: index k on k's lanes (keys in one fibre per row), and nested lanes (SDDMM i x j, SpMSpM i x k)
PARALLEL_SCHEDULES = (("reductions.ff", {"i": 2}), ("spmm.ff", {"k": 2}), ("sddmm.ff", {"i": 2, "j": 2}),
                      ("spmm.ff", {"i": 2, "k": 2}))
MODEL_PROGRAMS = (("graphsage2.ff", "none"), ("autoencoder.ff", "full"), ("decoder.ff", "none"))


@dataclass
class Entry:
    """One kernel of a suite: a program and the data it runs on."""
    name: str
    program: object            # fuseflow.samml.Program
    inputs: dict               # tensor name -> array / scipy matrix
    meta: dict = field(default_factory=dict)


@dataclass
class Suite:
    name: str
    entries: list
    notes: list = field(default_factory=list)     # what was left out, and why

    def __len__(self):
        return len(self.entries)


def examples_dir():
    """The example programs' folder (``fuseflow/programs``, shipped with the package)."""
    from .. import programs
    d = programs.directory()
    return d if os.path.isdir(d) else None


def classic(name, n=None, density=0.3, seed=0):
    """A classic kernel at scale ``n`` (its default size when None) on random data."""
    if name not in kernels.SUITE:
        raise FuseFlowError("kernel", f"unknown classic kernel {name!r} (known: {', '.join(kernels.SUITE)})")
    program = kernels.build(name, n)
    inputs = kernels.random_inputs(program, density=density, seed=seed)
    size = f"n{n}" if n else "default"
    return Entry(f"{name}/{size}/d{density:g}/s{seed}", program, inputs,
                 {"source": "classic", "kernel": name, "size": n, "density": density, "seed": seed})


def compiled(path, fuse, density=COMPILED_DENSITY, seed=COMPILED_SEED, parallel=None):
    """An ``.ff`` program compiled with ``fuse`` granularity (and ``parallel`` lanes, e.g. ``{"i": 2}``), on
    random data."""
    from ..compiler import compile_program, parse_file
    from ..models import program_inputs
    result = compile_program(parse_file(path), fuse=fuse, parallel=parallel)
    program = result.program
    base = os.path.splitext(os.path.basename(path))[0]
    # the ML model examples run on model-scale data (fuseflow.models), the others on uniform random data
    inputs, data = program_inputs(program, base, density=density, seed=seed)
    lanes = "/parallel=" + ",".join(f"{i}{n}" for i, n in parallel.items()) if parallel else ""
    return Entry(f"{base}.ff/fuse={fuse}{lanes}", program, inputs,
                 {"source": "compiled", "kernel": base, "file": os.path.basename(path), "fuse": fuse,
                  "density": density if data == "random" else None, "data": data, "seed": seed,
                  "kernels": len(program.kernels), **({"parallel": dict(parallel)} if parallel else {})})


def blocked(name, block, density=0.5, seed=1):
    """A block-sparse program of :data:`BLOCK_PROGRAMS` at block size ``block`` (``BLOCK_GRID`` blocks per
    dimension) on random data: each block of a blocked matrix is stored with probability ``density`` and then
    dense (an element is 0 with probability 0.1), blocked vectors are dense."""
    import numpy as np

    from ..compiler import compile_text
    n = BLOCK_GRID * block
    program = compile_text(BLOCK_PROGRAMS[name].format(n=n, b=block), name=name).program
    rng = np.random.default_rng(seed)
    inputs = {}
    for t in program.inputs:
        vals = kernels.random_sparse(rng, tuple(t.shape), 0.9)
        if len(t.shape) == 2:
            keep = rng.random((n // block, n // block)) < density
            vals = vals * np.kron(keep, np.ones((block, block)))
        inputs[t.name] = vals
    return Entry(f"{name}/b{block}/n{n}/d{density:g}/s{seed}", program, inputs,
                 {"source": "blocked", "kernel": name, "block": block, "size": n, "density": density, "seed": seed})


def blocked_attention(block, n, d, seed):
    """:data:`BLOCK_ATTENTION` at block size ``block``: M a BigBird mask over ``block`` x ``block`` blocks (a window
    of 3 blocks, one global block, one random block per block row), Q, KT, V dense in [-1, 1] (multiples of 1/64)."""
    import numpy as np

    from ..compiler import compile_text
    from ..samml.masks import dense_mask, parse_mask
    program = compile_text(BLOCK_ATTENTION.format(n=n, d=d, b=block), name="battention").program
    spec = f"bigbird:block={block},window=3,global=1,random=1,seed={seed}"
    rng = np.random.default_rng(seed)
    inputs = {"M": dense_mask(parse_mask(spec, "suite"), n, n).astype(np.float64)}
    for name, shape in (("Q", (n, d)), ("KT", (d, n)), ("V", (n, d))):
        inputs[name] = rng.integers(-64, 65, shape) / 64.0
    return Entry(f"battention/b{block}/n{n}/d{d}/s{seed}", program, inputs,
                 {"source": "blocked", "kernel": "battention", "block": block, "size": n, "density": None,
                  "seed": seed})


def blocks():
    entries = [blocked(name, b, d, s) for name in BLOCK_PROGRAMS for b in BLOCK_SIZES for s, d in BLOCK_DATASETS]
    entries += [blocked_attention(*case) for case in BLOCK_ATTENTION_CASES]
    return Suite("blocks", entries, [])


def _compiled_entries(files_fuses, notes):
    """Entries for (file, fuse) pairs; a compiler that cannot be used is a note, not a failure of the suite."""
    out = []
    try:
        import fuseflow.compiler  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure: leave the compiled programs out
        notes.append(f"compiled programs left out: fuseflow.compiler does not import ({type(exc).__name__}: {exc})")
        return out
    for path, fuse in files_fuses:
        try:
            entry = compiled(path, fuse)
            nodes = sum(len(k.nodes) for k in entry.program.kernels)
            if nodes > MAX_COMPILED_NODES:
                notes.append(f"{os.path.basename(path)} (fuse={fuse}) left out: {nodes} nodes (more than "
                             f"{MAX_COMPILED_NODES}; its Verilator build and run would take hours)")
                continue
            out.append(entry)
        except FuseFlowError as exc:
            notes.append(f"{os.path.basename(path)} (fuse={fuse}) left out: the compiler rejects it "
                         f"({exc.what}: {exc.why})")
    return out


def quick():
    entries = [classic(k, None, d, s) for k in QUICK_KERNELS for s, d in QUICK_DATASETS]
    notes = []
    ex = examples_dir()
    if ex is None:
        notes.append("compiled programs left out: fuseflow/programs not found")
    else:
        entries += _compiled_entries([(os.path.join(ex, f), fuse) for f, fuse in QUICK_PROGRAMS], notes)
    return Suite("quick", entries, notes)


def _seed(name, n, density):
    """A fixed seed per (kernel, size, density), independent of the suite's other entries."""
    return (sum(map(ord, name)) * 7919 + n * 101 + int(round(density * 100))) % 100_000


def default(sizes=DEFAULT_SIZES, densities=DEFAULT_DENSITIES):
    entries = [classic(k, n, d, _seed(k, n, d)) for k in kernels.SUITE for n in sizes for d in densities]
    for k, n, d, seed in LARGE_LEVELS:
        e = classic(k, n, d, seed)
        e.meta["source"] = "large level"
        entries.append(e)
    notes = []
    ex = examples_dir()
    if ex is None:
        notes.append("compiled programs left out: fuseflow/programs not found")
    else:
        files = sorted(glob.glob(os.path.join(ex, "*.ff")))
        entries += _compiled_entries([(f, fuse) for f in files for fuse in FUSIONS], notes)
    entries += blocks().entries
    return Suite("default", entries, notes)


def models():
    notes = []
    ex = examples_dir()
    if ex is None:
        return Suite("models", [], ["compiled programs left out: fuseflow/programs not found"])
    entries = _compiled_entries([(os.path.join(ex, f), fuse) for f, fuse in MODEL_PROGRAMS], notes)
    return Suite("models", entries, notes)


def parallel():
    ex = examples_dir()
    if ex is None:
        return Suite("parallel", [], ["compiled programs left out: fuseflow/programs not found"])
    entries = [compiled(os.path.join(ex, f), "regions", parallel={"i": n})
               for f in PARALLEL_PROGRAMS for n in PARALLEL_FACTORS]
    entries += [compiled(os.path.join(ex, f), "regions", parallel=schedule) for f, schedule in PARALLEL_SCHEDULES]
    return Suite("parallel", entries, [])


SUITES = {"quick": quick, "default": default, "models": models, "parallel": parallel, "blocks": blocks}


def get_suite(name):
    """The suite called ``name`` (``quick``, ``default``, ``models``, ``parallel`` or ``blocks``)."""
    if isinstance(name, Suite):
        return name
    if name not in SUITES:
        raise FuseFlowError("--suite", f"unknown suite {name!r} (known: {', '.join(SUITES)})")
    return SUITES[name]()


__all__ = ["Entry", "Suite", "SUITES", "get_suite", "quick", "default", "models", "parallel", "blocks", "classic",
           "compiled", "blocked"]
