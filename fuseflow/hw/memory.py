"""Tensor memories of a kernel top: the plan (names, depths, widths, host address map) and the Amaranth side.

Every level array of every tensor of a program gets one :class:`amaranth.lib.memory.Memory`:

- a compressed level ``k`` of tensor ``T`` has ``T.k.seg`` (parent positions + 1 entries), ``T.k.crd``
  (``capacity[k]`` entries) and ``T.k.first`` (one entry per fibre, i.e. per parent position: the fibre's first
  coordinate, whether it is empty and whether it holds one coordinate, :func:`first_words`; redundant with seg and
  crd, written with them by the host and by level_write, so that level_scan reads it beside seg instead of reading
  crd at seg[r] within a cycle); a dense level has no arrays (its size is the tensor's shape);
- the values are ``T.vals`` (``capacity[-1]`` entries, signed, the program's value width).

Capacities come from ``TensorDecl.capacity`` (entries per level, then values, as
:meth:`fuseflow.tensors.PackedTensor.capacities` counts them) when the graph declares them, else from the data
the user gave (inputs packed, outputs and intermediates sized by the reference simulator's run on that data);
with neither, building is an error.

Storage (:func:`memory_storage`, one rule in :mod:`fuseflow.samml.storage`, which the simulator reads too): a memory read only through read ports of latency
``registry.MEMORY_READ_LATENCY`` (2: crd and vals; level_scan's crd port and array's vals port address them one cycle
ahead, from their next state and the next head of their input, and take the registered data one cycle after their
firing) goes to block RAM once it holds :data:`BLOCK_RAM_MIN_BITS` bits; the seg and first arrays (level_scan reads them
with an enable at the token behind its head: latency 1, or 2 in block RAM, its ``bounds_latency``) once they hold
:data:`BOUNDS_BLOCK_MIN_BITS`; below that,
Yosys picks LUT RAM or flip-flops. :class:`TensorMemory` builds every read port: on ECP5 a block memory is DP16KD
instances whose output register holds the read data (:mod:`fuseflow.hw.block_ram`: Yosys maps a synchronous read without
that register and does not absorb a fabric register into it); elsewhere (Verilator, the Amaranth simulator, iCE40, and
every LUT memory) an Amaranth ``Memory`` synchronous read port and one register after it (a block memory's ``Memory``
carries ``ram_style = "block"``: iCE40 SB_RAM40_4K). Read during write of one entry in one cycle: the DP16KD's read data
is undefined, the generic model gives the old entry; no kernel both writes and reads a memory (the top registers the
writers' writes; :func:`fuseflow.hw.top.check_kernel_reads`), and the host writes and reads only while the top is idle.

Writer ops drive one write port per memory through a register (a write lands a cycle after the writer's firing),
shared with the host (the writer wins; the host only writes while the top is idle). The host reads through a read port of latency 2 shared with the first op that reads
the memory with one (level_scan's seg and first in block RAM: their ports of latency 2 with an enable, then the
address is the host's and the enable set while idle), or in block RAM with a port of latency 1 (then a register
follows), or a port of its own (latency 2 for a block
memory, else 1 and a register after the selection of the memory): :data:`HOST_READ_LATENCY` cycles from address
to data, outside every kernel's cycle count.

Host address map: ``host_sel`` picks a memory by its index in :attr:`MemoryPlan.memories` (``sel`` in the
manifest), or the register file at ``sel = len(memories)``; ``host_addr`` is the entry. Registers are listed
in :attr:`MemoryPlan.registers` (name, index, writable).
"""

from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal

from ..errors import HardwareError
from ..samml.registry import MEMORY_READ_LATENCY
# the storage rule is the simulator's too (a level_scan's bounds_latency depends on it): defined in samml
from ..samml.storage import (BLOCK_RAM_MIN_BITS, BOUNDS_ARRAYS, BOUNDS_BLOCK_MIN_BITS,  # noqa: F401
                             array_depth, array_shape, memory_storage)

#: width of the registers of the register file (cycle counters, counts)
REG_WIDTH = 32

#: cycles from ``host_sel``/``host_addr`` to the entry on ``host_rdata``: a read of latency 2 (its data from a
#: register, then an AND-OR with the registered select), or a read of latency 1 and a register after the
#: multiplexer of the memories; the manifest's ``host.read_latency``
HOST_READ_LATENCY = 2

@dataclass
class MemSpec:
    """One tensor array in hardware."""
    name: str            # "B.1.crd", "B.vals"
    tensor: str
    level: int | None    # None for vals
    array: str           # "seg" | "crd" | "first" | "vals"
    depth: int           # entries built
    width: int           # bits per entry
    signed: bool
    role: str            # the tensor's role
    sel: int = 0         # host select index
    capacity: int = 0    # entries the data may use (== depth, except depth is at least 1)
    storage: str = "lut"  # "block" (block RAM) or "lut" (Yosys picks LUT RAM or flip-flops)

    def to_json(self):
        return asdict(self)


@dataclass
class Register:
    name: str
    index: int
    writable: bool = False
    doc: str = ""


@dataclass
class MemoryPlan:
    memories: list = field(default_factory=list)
    registers: list = field(default_factory=list)
    crd_width: int = 16
    value_width: int = 32
    value_frac: int = 16
    capacities: dict = field(default_factory=dict)      # tensor -> [per level..., vals]
    capacity_source: dict = field(default_factory=dict)  # tensor -> "graph" | "data"
    index_widths: dict = field(default_factory=dict)     # tensor -> width of its seg/crd memories

    def __post_init__(self):
        self.by_name = {m.name: m for m in self.memories}

    @property
    def reg_sel(self):
        """The ``host_sel`` value of the register file."""
        return len(self.memories)

    @property
    def data_width(self):
        return max([REG_WIDTH] + [m.width for m in self.memories])

    @property
    def addr_width(self):
        n = max([m.depth for m in self.memories] + [len(self.registers), 2])
        return max(1, (n - 1).bit_length())

    @property
    def sel_width(self):
        return max(1, self.reg_sel.bit_length())

    def add_register(self, name, writable=False, doc=""):
        r = Register(name, len(self.registers), writable, doc)
        self.registers.append(r)
        return r

    def reg(self, name):
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(name)

    def memory(self, tensor, level, array):
        name = f"{tensor}.vals" if array == "vals" else f"{tensor}.{level}.{array}"
        return self.by_name.get(name)

    def to_json(self):
        return {
            "data_width": self.data_width, "addr_width": self.addr_width, "sel_width": self.sel_width,
            "reg_sel": self.reg_sel, "read_latency": HOST_READ_LATENCY, "crd_width": self.crd_width,
            "value": {"width": self.value_width, "frac": self.value_frac},
            "capacities": self.capacities, "capacity_source": self.capacity_source,
            "index_widths": self.index_widths,
            "memories": [m.to_json() for m in self.memories],
            "registers": [asdict(r) for r in self.registers],
        }


def tensor_arrays(decl):
    """``[(level, array)]`` of a tensor declaration, in host order (levels outer to inner, then vals):
    :func:`fuseflow.samml.storage.tensor_memories`."""
    from ..samml.storage import tensor_memories
    return [(lv, array) for lv, array, _ in tensor_memories(decl)]


def plan_memories(program, data_capacities=None):
    """Plan the memories of ``program``.

    ``data_capacities`` maps tensor names to capacities measured on data (``PackedTensor.capacities()``);
    declared capacities win, and data that exceeds them is an error. Raises :class:`HardwareError` when a
    tensor has neither, or when an array does not fit the configured widths.
    """
    cfg = program.config
    value = cfg.get("value", {})
    if value.get("format", "fixed") != "fixed":
        raise HardwareError("config.value.format", f"hardware needs fixed-point values, the graph says "
                                                    f"{value.get('format')!r}")
    crd_width = int(cfg.get("crd_width", 16))
    from ..samml.storage import build_capacity, index_width, memory_width
    from ..samml.widths import check_fits_width
    vwidth, vfrac = int(value.get("width", 32)), int(value.get("frac", 16))
    data_capacities = data_capacities or {}
    plan = MemoryPlan(crd_width=crd_width, value_width=vwidth, value_frac=vfrac)
    for t in program.tensors.values():
        n = t.order + 1
        have = data_capacities.get(t.name)
        cap = build_capacity(t, have)
        if cap is None:
            raise HardwareError(f"tensor {t.name}", "no capacity: declare 'capacity' (entries per level, then "
                                                    "values) in graph.json or give data with --inputs")
        source = "graph" if t.capacity is not None else "data"
        if source == "graph":
            if len(cap) != n:
                raise HardwareError(f"tensor {t.name}", f"capacity has {len(cap)} entries, expected {n} "
                                                        f"(one per level, then values)")
            if have is not None:
                check_fits(t.name, cap, have)
        plan.capacities[t.name] = cap
        plan.capacity_source[t.name] = source
        # one rule (fuseflow.samml.widths) for the simulator and the hardware: coordinates below the
        # dimensions, positions up to the capacities, all within the program's crd_width
        check_fits_width(program, t.name, t.shape, cap, error=HardwareError)
        plan.index_widths[t.name] = index_width(program, t, cap)
        for lv, array in tensor_arrays(t):
            depth = array_depth(cap, lv, array)
            # a blocked tensor: one block per word (docs/samml.md, "Blocks"); seg, crd, first: samml.storage's
            # rule, the simulator's and the off-chip contract's too
            width, signed = memory_width(program, t, cap, lv, array), array == "vals"
            name = f"{t.name}.vals" if array == "vals" else f"{t.name}.{lv}.{array}"
            spec = MemSpec(name, t.name, lv, array, max(1, depth), width, signed, t.role, len(plan.memories),
                           depth)
            spec.storage = memory_storage(array, spec.depth * width)
            plan.memories.append(spec)
    plan.__post_init__()
    plan.add_register("status", doc="bit 0 busy, bit 1 done, bit 2 a writer overflowed a memory, bit 3 an op "
                                              "exceeded its capacity (register op_overflow)")
    plan.add_register("cycles", doc="kernel cycles of the last run (sum over kernels)")
    plan.add_register("wall_cycles", doc="cycles from start to done, kernel hand-over included")
    for k in program.kernels:
        plan.add_register(f"kernel.{k.name}.cycles", doc=f"cycles of kernel {k.name}")
    plan.add_register("overflow", doc="bit i: memory sel=i was written past its capacity")
    return plan


def check_fits(name, capacity, have):
    for lv, (h, c) in enumerate(zip(have, capacity)):
        if h > c:
            what = "values" if lv == len(capacity) - 1 else f"level {lv}"
            raise HardwareError(f"tensor {name}", f"{what} holds {h} entries but the build's capacity is {c}")


def tensor_images(plan, name, packed):
    """``{memory name: [raw unsigned words]}`` of a PackedTensor (fixed-point vals already raw ints).

    Raises :class:`HardwareError` if the data does not fit the planned depths or widths."""
    cap = plan.capacities[name]
    check_fits(name, cap, packed.capacities())
    out = {}
    for lv, level in enumerate(packed.levels):
        if getattr(level, "kind", None) != "compressed":
            continue
        arrays = {"seg": [int(x) for x in level.seg], "crd": [int(x) for x in level.crd]}
        arrays["first"] = first_words(arrays["seg"], arrays["crd"])
        for array, words in arrays.items():
            spec = plan.memory(name, lv, array)
            _check_width(spec, words)
            out[spec.name] = words
    spec = plan.memory(name, None, "vals")
    if packed.format.block:                 # one block per word, element 0 at the LSBs
        from .token import pack_block
        out[spec.name] = [pack_block(b, plan.value_width) for b in packed.vals]
        _check_width(spec, [0] * len(out[spec.name]))
        return out
    words = [int(x) for x in packed.vals]
    _check_width(spec, words)
    out[spec.name] = [w & ((1 << spec.width) - 1) for w in words]
    return out


def _check_width(spec, words):
    if len(words) > spec.capacity:
        raise HardwareError(f"memory {spec.name}", f"{len(words)} entries exceed the capacity {spec.capacity}")
    if not words:
        return
    lo, hi = min(words), max(words)
    if spec.signed:
        ok = -(1 << (spec.width - 1)) <= lo and hi < (1 << (spec.width - 1))
    else:
        ok = lo >= 0 and hi < (1 << spec.width)
    if not ok:
        bad = hi if hi >= 0 and not (hi < (1 << (spec.width - (1 if spec.signed else 0)))) else lo
        raise HardwareError(f"memory {spec.name}", f"entry {bad} does not fit {spec.width} "
                                                   f"{'signed ' if spec.signed else ''}bits")


def first_words(seg, crd):
    """The ``first`` array of a compressed level: per fibre ``r``, ``crd[seg[r]] << 2 | single << 1`` when the fibre
    has coordinates (``single``: exactly one, seg[r + 1] == seg[r] + 1), else 1 (empty). level_scan's IDLE step
    takes a fibre's first coordinate, emptiness and whether a SCAN step follows from it, read at the next head like
    seg, instead of reading crd at seg[r] and comparing seg[r] with seg[r + 1] within a cycle (docs/hardware.md,
    "Memories"); level_write writes the same words."""
    return [crd[seg[r]] << 2 | int(seg[r + 1] == seg[r] + 1) << 1 if seg[r] < seg[r + 1] else 1
            for r in range(len(seg) - 1)]


def to_signed(word, width):
    word &= (1 << width) - 1
    return word - (1 << width) if word >> (width - 1) else word


# --- Amaranth side ---------------------------------------------------------------------------------

def attach_read(m, mem, op, prefix, mp, addr=None, en=None):
    """Give op ``op``'s read interface ``prefix`` (of its :class:`~fuseflow.hw.ops._common.MemPorts` ``mp``) a
    read port of ``mem`` of the interface's latency and offset, and wire address, data and (latency 1) enable.
    ``addr``/``en``: what drives the port instead of the op's own (the kernel top's host multiplexer).
    Returns the port."""
    rp = mem.read_port(mp.latency(prefix), mp.offsets.get(prefix, 0), enable=prefix in mp.held_reads,
                       plus_one=prefix in mp.plus_one)
    op_addr = getattr(op, f"{prefix}_addr")
    m.d.comb += [rp.addr.eq((op_addr if addr is None else addr)[:mem.addr_width]),
                 getattr(op, f"{prefix}_data").eq(rp.data)]
    if rp.data1 is not None:
        m.d.comb += getattr(op, f"{prefix}_data1").eq(rp.data1)
    if rp.en is not None:
        m.d.comb += rp.en.eq(getattr(op, f"{prefix}_en") if en is None else en)
        if mem.block:
            mp.in_block.add(prefix)
    return rp


def attach_banked_read(m, banks, bank, op, prefix, mp, addr=None, en=None):
    """:func:`attach_read` on a memory of two banks (``banks``: two :class:`TensorMemory` of one spec): both banks
    read the same address, and the op sees bank ``bank``'s data (a signal that holds still while the op reads).
    Returns a port-like view (``latency``, ``data``, ``data1``, ``row``) of the chosen bank's read."""
    ports = [attach_read(m, mem, SimpleNamespace(**{f"{prefix}_addr": getattr(op, f"{prefix}_addr"),
                                                    f"{prefix}_en": getattr(op, f"{prefix}_en", None),
                                                    f"{prefix}_data": Signal(mem.width, name=f"b{b}_data"),
                                                    f"{prefix}_data1": Signal(mem.width, name=f"b{b}_data1")}),
                         prefix, mp, addr, en) for b, mem in enumerate(banks)]
    view = SimpleNamespace(latency=ports[0].latency, en=None, data=Signal.like(ports[0].data, name="bank_data"),
                           data1=None, row=None)
    m.d.comb += [view.data.eq(Mux(bank, ports[1].data, ports[0].data)), getattr(op, f"{prefix}_data").eq(view.data)]
    if ports[0].data1 is not None:
        view.data1 = Signal.like(ports[0].data1, name="bank_data1")
        m.d.comb += [view.data1.eq(Mux(bank, ports[1].data1, ports[0].data1)),
                     getattr(op, f"{prefix}_data1").eq(view.data1)]
    if ports[0].row is not None:
        view.row = Signal.like(ports[0].row, name="bank_row")
        m.d.comb += view.row.eq(Mux(bank, ports[1].row, ports[0].row))
    return view


def banked_port(m, banks, bank, latency, addr):
    """A read port of its own on both ``banks`` at ``addr`` (the host's), viewed as one: bank ``bank``'s data."""
    ports = [mem.read_port(latency) for mem in banks]
    view = SimpleNamespace(latency=latency, data=Signal.like(ports[0].data, name="bank_host_data"), row=None)
    m.d.comb += [p.addr.eq(addr) for p in ports]
    m.d.comb += view.data.eq(Mux(bank, ports[1].data, ports[0].data))
    if ports[0].row is not None:
        view.row = Signal.like(ports[0].row, name="bank_host_row")
        m.d.comb += view.row.eq(Mux(bank, ports[1].row, ports[0].row))
    return view


class TensorMemory(Elaboratable):
    """One tensor array in hardware: its storage, read ports of latency 0 (combinational), 1 (with an enable) or
    ``registry.MEMORY_READ_LATENCY`` (:meth:`read_port`) and at most one write port (:meth:`write_port`).

    A read port of latency ``MEMORY_READ_LATENCY`` (2) shows in cycle t + 2 the entry addressed in cycle t,
    from a register: in block RAM on ECP5 (``impl="dp16kd"``: DP16KD blocks with their output register,
    :mod:`fuseflow.hw.block_ram`; one set of blocks per such port, all written together), elsewhere
    (``"generic"``: Verilator, the Amaranth simulator, iCE40) an Amaranth ``Memory`` synchronous read port and
    one register after it. ``impl=None`` picks by the platform: ``"dp16kd"`` for a block memory elaborated for
    an ECP5, else ``"generic"``; ``"dp16kd-model"`` runs the same blocks in the Amaranth simulator. The
    generic ``Memory`` (:attr:`storage`) carries ``ram_style = "block"`` for a block memory.

    ``pack`` k > 1 (a power of two; a tiled build's memory that the off-chip DMA fills k entries per beat,
    :func:`fuseflow.samml.offchip.entries_per_beat`): the storage is one generic ``Memory`` of rows of k
    entries with a write enable per entry (entry ``a`` in lane ``a % k`` of row ``a // k``); a read port selects
    its entry by the address's low bits (registered with the read) and shows the whole row on ``row``; the write
    port writes one entry (``addr``, ``data``, ``en``) or a whole row (``row_addr``, ``row_data``, ``row_en``,
    which wins). A port's ``offset`` is then an adder before the read (no shifted copies)."""

    def __init__(self, depth: int, width: int, init=None, *, block: bool = False, name: str = "mem",
                 impl: str | None = None, pack: int = 1):
        from amaranth.lib.memory import Memory
        words = list(init or [])
        if len(words) > depth:
            raise HardwareError(f"memory {name}", f"{len(words)} entries exceed the depth {depth}")
        if impl not in (None, "generic", "dp16kd", "dp16kd-model"):
            raise HardwareError(f"memory {name}", f"unknown implementation {impl!r}")
        if pack < 1 or pack & (pack - 1):
            raise HardwareError(f"memory {name}", f"pack {pack} is not a power of two")
        self.depth, self.width, self.block, self.name, self.impl, self.pack = depth, width, block, name, impl, pack
        self.words = words + [0] * (depth - len(words))
        if pack > 1:
            rows = -(-depth // pack)
            padded = self.words + [0] * (rows * pack - depth)
            init_rows = [sum((padded[r * pack + j] & ((1 << width) - 1)) << (j * width) for j in range(pack))
                         for r in range(rows)]
            self.storage = Memory(shape=width * pack, depth=rows, init=init_rows,
                                  attrs={"ram_style": "block"} if block else None)
        else:
            self.storage = Memory(shape=width, depth=depth, init=self.words,
                                  attrs={"ram_style": "block"} if block else None)
        self.storage._MustUse__silence = True       # elaborated only by the generic implementation
        self.addr_width = max(1, (depth - 1).bit_length())
        self.reads = []
        self.write = None

    @classmethod
    def from_spec(cls, spec: MemSpec, init=None, impl: str | None = None, pack: int = 1) -> "TensorMemory":
        """The memory of one planned array (``init``: raw unsigned words)."""
        return cls(spec.depth, spec.width, init, block=spec.storage == "block", name=spec.name, impl=impl,
                   pack=pack)

    def read_port(self, latency: int = MEMORY_READ_LATENCY, offset: int = 0,
                  enable: bool = False, plus_one: bool = False) -> SimpleNamespace:
        """A read port (``addr`` in, ``data`` out): ``data`` shows the entry ``addr + offset`` named ``latency``
        cycles earlier (0: in the same cycle). ``enable`` (latency 1 or 2) gives the port ``en`` (in): the
        address is taken only at an edge ending a cycle with ``en`` set, and the entry read there is the data
        (latency 1) or, one edge later, the data's register (latency 2; in a LUT memory a combinational read and a
        register with that enable, then one more register; in block RAM the address register's clock enable and
        the output register). A port with an ``offset`` reads a copy of the memory
        shifted by ``offset`` entries, written with the memory (LUT RAM gives every read port a copy of its own
        anyway, and so does block RAM here), so no adder sits between the address and the read. ``plus_one`` gives
        the port ``data1`` (out): the same entry + 1 (modulo 2^width), in block RAM from a copy of its own whose
        words are the entries + 1 (written with the memory, the write data + 1), so no adder follows the block's
        read; elsewhere ``data`` + 1. A block memory has no combinational read."""
        if latency not in (0, 1, MEMORY_READ_LATENCY):
            raise HardwareError(f"memory {self.name}", f"no read port of latency {latency}")
        if self.block and latency == 0:
            raise HardwareError(f"memory {self.name}", "a block RAM has no combinational read")
        if offset < 0:
            raise HardwareError(f"memory {self.name}", f"no read port with offset {offset} (offset >= 0)")
        if enable and latency == 0:
            raise HardwareError(f"memory {self.name}", f"a read port of latency {latency} has no enable")
        n = len(self.reads)
        port = SimpleNamespace(addr=Signal(self.addr_width, name=f"r{n}_addr"),
                               data=Signal(self.width, name=f"r{n}_data"), latency=latency, offset=offset,
                               en=Signal(name=f"r{n}_en") if enable else None,
                               data1=Signal(self.width, name=f"r{n}_data1") if plus_one else None,
                               row=Signal(self.width * self.pack, name=f"r{n}_row") if self.pack > 1 else None)
        self.reads.append(port)
        return port

    def write_port(self) -> SimpleNamespace:
        """The write port (``addr``, ``data``, ``en`` in; written at the clock edge ending the cycle)."""
        if self.write is not None:
            raise HardwareError(f"memory {self.name}", "has one write port")
        self.write = SimpleNamespace(addr=Signal(self.addr_width, name="w_addr"),
                                     data=Signal(self.width, name="w_data"), en=Signal(name="w_en"))
        if self.pack > 1:
            self.write.row_addr = Signal(max(1, (len(self.storage.init) - 1).bit_length()), name="w_row_addr")
            self.write.row_data = Signal(self.width * self.pack, name="w_row_data")
            self.write.row_en = Signal(name="w_row_en")
        return self.write

    def implementation(self, platform) -> str:
        """``"generic"``, ``"dp16kd"`` or ``"dp16kd-model"`` (class doc)."""
        if self.impl is not None:
            return self.impl if self.block else "generic"
        from .ops._cells import dsp_family
        return "dp16kd" if self.block and dsp_family(platform) == "ecp5" else "generic"

    def elaborate(self, platform):
        from amaranth.lib.memory import Memory
        m = Module()
        if self.pack > 1:
            return self._elaborate_packed(m)
        impl = self.implementation(platform)
        if impl != "generic":
            from .block_ram import block_memory
            w = self.write
            for i, port in enumerate(self.reads):
                k = port.offset
                # the address cut to its width: the blocks' row choice reads its high bits
                waddr = ((w.addr - k)[:self.addr_width] if k else w.addr) if w else None
                block_memory(m, f"blocks{i}", self.depth, self.width, self._copy_words(k), port.addr, port.data,
                             waddr, w.data if w else None, self._copy_write_enable(k) if w else None,
                             model=impl == "dp16kd-model", latency=port.latency, ren=port.en)
                if port.data1 is not None:      # the entries + 1 (their words and writes + 1, modulo 2^width)
                    block_memory(m, f"blocks{i}_plus1", self.depth, self.width,
                                 [(x + 1) & ((1 << self.width) - 1) for x in self._copy_words(k)], port.addr,
                                 port.data1, waddr, (w.data + 1)[:self.width] if w else None,
                                 self._copy_write_enable(k) if w else None, model=impl == "dp16kd-model",
                                 latency=port.latency, ren=port.en)
            return m
        m.submodules.storage = self.storage
        copies = {0: self.storage}                 # offset -> storage holding entry addr + offset at addr
        for k in sorted({port.offset for port in self.reads} - {0}):
            copies[k] = m.submodules[f"storage_plus{k}"] = Memory(shape=self.width, depth=self.depth,
                                                                  init=self._copy_words(k))
        for i, port in enumerate(self.reads):
            mem = copies[port.offset]
            if port.latency == 0:
                rp = mem.read_port(domain="comb")
                m.d.comb += port.data.eq(rp.data)
            elif port.en is not None and not self.block:
                # a LUT memory: a combinational read into a register with the enable. The data goes through a
                # kept wire, so Yosys does not merge the register into the read port, where its LUT-RAM mapping
                # may register the address instead and put the read on the paths from the data
                rp = mem.read_port(domain="comb")
                comb_data = Signal(self.width, name=f"r{i}_comb", attrs={"keep": 1})
                data = Signal(self.width, name=f"r{i}_data_q")
                m.d.comb += comb_data.eq(rp.data)
                with m.If(port.en):
                    m.d.sync += data.eq(comb_data)
                if port.latency == 2:               # as a block's output register, after the enabled read
                    r = Signal.like(data, name=f"r{i}_data_p1")
                    m.d.sync += r.eq(data)
                    data = r
                m.d.comb += port.data.eq(data)
            else:
                rp = mem.read_port()
                if port.en is not None:
                    m.d.comb += rp.en.eq(port.en)
                data = rp.data
                for k in range(1, port.latency):     # the data registered once more (a block's output register)
                    r = Signal.like(data, name=f"r{i}_data_p{k}")
                    m.d.sync += r.eq(data)
                    data = r
                m.d.comb += port.data.eq(data)
            m.d.comb += rp.addr.eq(port.addr)
            if port.data1 is not None:          # after the port's register: no copy of its own
                m.d.comb += port.data1.eq((port.data + 1)[:self.width])
        if self.write is not None:
            for k, mem in copies.items():
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(self.write.addr - k), wp.data.eq(self.write.data),
                             wp.en.eq(self._copy_write_enable(k))]
        return m

    def _elaborate_packed(self, m):
        """Rows of ``pack`` entries (class doc): every port reads the one storage at ``addr + offset``."""
        k, w, s = self.pack, self.width, self.pack.bit_length() - 1
        m.submodules.storage = mem = self.storage
        for i, port in enumerate(self.reads):
            a = Signal(self.addr_width + 1, name=f"r{i}_entry")
            m.d.comb += a.eq(port.addr + port.offset)
            inside = Signal(name=f"r{i}_inside")         # a shifted copy held 0 beyond the last entry
            m.d.comb += inside.eq(a < self.depth)
            if port.latency == 0 or (port.en is not None and not self.block):
                rp = mem.read_port(domain="comb")
                row, lane, ok = rp.data, a[:s], inside
                if port.latency:                         # a LUT memory: the read registered with the enable
                    row_q, lane_q, ok_q = Signal.like(row, name=f"r{i}_row_q"), Signal(s, name=f"r{i}_lane_q"), \
                        Signal(name=f"r{i}_inside_q")
                    with m.If(port.en):
                        m.d.sync += [row_q.eq(row), lane_q.eq(lane), ok_q.eq(ok)]
                    row, lane, ok = row_q, lane_q, ok_q
            else:
                rp = mem.read_port()
                lane, ok = Signal(s, name=f"r{i}_lane_q"), Signal(name=f"r{i}_inside_q")
                if port.en is not None:
                    m.d.comb += rp.en.eq(port.en)
                    with m.If(port.en):
                        m.d.sync += [lane.eq(a[:s]), ok.eq(inside)]
                else:
                    m.d.sync += [lane.eq(a[:s]), ok.eq(inside)]
                row = rp.data
            m.d.comb += rp.addr.eq(a[s:])
            data = Signal(w, name=f"r{i}_picked")
            m.d.comb += data.eq(Mux(ok, row.word_select(lane, w), 0))
            for j in range(1, port.latency if port.latency else 1):   # a block's output register
                r, rr = Signal.like(data, name=f"r{i}_data_p{j}"), Signal.like(row, name=f"r{i}_row_p{j}")
                m.d.sync += [r.eq(data), rr.eq(row)]
                data, row = r, rr
            m.d.comb += [port.data.eq(data), port.row.eq(row)]
            if port.data1 is not None:
                m.d.comb += port.data1.eq((port.data + 1)[:w])
        if self.write is not None:
            wr = self.write
            wp = mem.write_port(granularity=w)
            with m.If(wr.row_en):
                m.d.comb += [wp.addr.eq(wr.row_addr), wp.data.eq(wr.row_data), wp.en.eq((1 << k) - 1)]
            with m.Elif(wr.en & (wr.addr < self.depth)):
                m.d.comb += [wp.addr.eq(wr.addr[s:]), wp.data.eq(Cat(*[wr.data] * k)),
                             wp.en.eq(Const(1, k) << wr.addr[:s])]
        return m

    # a copy shifted by k entries (a read port of offset k) holds entry a at a - k, and nothing below k
    def _copy_words(self, k):
        """The initial words of the copy shifted by ``k`` entries."""
        return self.words[k:] + [0] * min(k, self.depth)

    def _copy_write_enable(self, k):
        """The write enable of the copy shifted by ``k`` entries (written at the write address - k)."""
        w = self.write
        return w.en & (w.addr >= k) if k else w.en
