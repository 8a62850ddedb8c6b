"""Host-side client of the UART bridge: load tensors by the build manifest, start, wait, read results and cycles.

The client talks to a byte :class:`Transport`; the same code drives a real serial port
(:class:`SerialTransport`, needs ``pyserial``) or the simulated board (:class:`fuseflow.boards.simboard.SimBoard`)::

    from fuseflow.boards.client import BridgeClient, SerialTransport, images_for
    man = json.load(open("build/manifest.json"))
    client = BridgeClient(SerialTransport("/dev/ttyUSB0", 115200), man, clock_hz=25e6)
    client.connect()                                   # checks the bitstream's build id against the manifest
    res = client.run(images_for(program, man, inputs))  # {"tensors", "cycles", "kernel_cycles", ...}

:meth:`BridgeClient.run` returns the same dict as the RTL runs of :mod:`fuseflow.hw` (it reuses
:func:`fuseflow.hw.top.host_run`), so :func:`fuseflow.hw.top.compare_tensors` checks it against the reference
simulator bit for bit.
"""

import time

from ..errors import HardwareError
from . import protocol as P


class BridgeError(HardwareError):
    """The board did not answer as the protocol says (no reply, wrong reply, other bitstream)."""
    default_what = "bridge"


class Transport:
    """A byte pipe to the bridge. ``read(n)`` returns exactly ``n`` bytes or raises :class:`BridgeError`."""

    def write(self, data):
        raise NotImplementedError

    def read(self, n):
        raise NotImplementedError

    def now(self):
        """Seconds on the transport's clock (wall time, or simulated time)."""
        return time.perf_counter()

    def sleep(self, seconds):
        time.sleep(seconds)

    def reset_input(self):
        """Drop any bytes received and not read yet."""

    def close(self):
        pass


class SerialTransport(Transport):
    """A real serial port through pyserial (optional dependency)."""

    def __init__(self, port, baud=115200, timeout=1.0):
        try:
            import serial
        except ImportError:
            raise BridgeError("pyserial", "not installed (pip install pyserial) - needed to talk to a board")
        self.port = serial.Serial(port, baud, timeout=timeout)

    def write(self, data):
        self.port.write(bytes(data))
        self.port.flush()

    def read(self, n):
        data = self.port.read(n)
        if len(data) != n:
            raise BridgeError(f"serial port {self.port.port}", f"no reply: got {len(data)} of {n} bytes")
        return data

    def reset_input(self):
        self.port.reset_input_buffer()

    def close(self):
        self.port.close()


class BridgeClient:
    """Commands of :mod:`fuseflow.boards.protocol` over ``transport``. ``manifest``: the build manifest (the
    host address map, memories and registers); ``clock_hz``: the board clock (turns cycle budgets into time)."""

    def __init__(self, transport, manifest, clock_hz=25e6):
        self.t = transport
        self.manifest = manifest
        self.layout = P.Layout.from_manifest(manifest)
        self.build_id = P.build_id(manifest)
        self.clock_hz = float(clock_hz)
        host = manifest["host"]
        self.memories = {m["name"]: m for m in host["memories"]}
        self.registers_map = {r["name"]: r["index"] for r in host["registers"]}
        self.reg_sel = host["reg_sel"]
        self.connected = False

    # --- the protocol's commands ---------------------------------------------------------------
    def identify(self):
        self.t.write(bytes([P.CMD_IDENT]))
        data = self.t.read(P.IDENT_BYTES)
        try:
            return P.parse_ident(data)
        except ValueError as exc:
            raise BridgeError("identify", str(exc))

    def connect(self, resync=True):
        """Identify the bridge and check that its layout and build id match the manifest."""
        try:
            info = self.identify()
        except BridgeError:
            if not resync:
                raise
            self.resync()
            info = self.identify()
        if info["version"] != P.VERSION:
            raise BridgeError("identify", f"bridge speaks protocol version {info['version']}, "
                                          f"this client {P.VERSION}")
        if info["layout"] != self.layout:
            raise BridgeError("identify", f"bridge field sizes {info['layout']} differ from the manifest's "
                                          f"{self.layout}: another bitstream is loaded")
        if info["build_id"] != self.build_id:
            raise BridgeError("identify", f"bitstream build id {info['build_id']:#010x} differs from the "
                                          f"manifest's {self.build_id:#010x}: another bitstream is loaded")
        self.connected = True
        return info

    def resync(self, quiet_seconds=None):
        """Let the bridge drop an incomplete command (silence longer than its timeout), flush input."""
        self.t.sleep(quiet_seconds if quiet_seconds is not None else 0.05)
        self.t.reset_input()

    def write(self, sel, addr, words):
        words = [int(w) for w in words]
        for i in range(0, len(words), P.MAX_BURST):
            chunk = words[i:i + P.MAX_BURST]
            self.t.write(P.encode_write(self.layout, sel, addr + i, chunk))
            r = self.t.read(1)[0]
            if r == P.BUSY:
                raise BridgeError("write", "the kernel is busy: the top ignores host writes during a run")
            if r != P.ACK:
                raise BridgeError("write", f"unexpected reply {r:#04x} to a write")

    def read(self, sel, addr, n):
        out = []
        while n > 0:
            k = min(n, P.MAX_BURST)
            self.t.write(P.encode_read(self.layout, sel, addr, k))
            out += P.decode_words(self.layout, self.t.read(k * self.layout.data_bytes))
            addr, n = addr + k, n - k
        return out

    def start(self):
        self.t.write(bytes([P.CMD_START]))
        r = self.t.read(1)[0]
        if r == P.BUSY:
            raise BridgeError("start", "the kernel is already running")
        if r != P.ACK:
            raise BridgeError("start", f"unexpected reply {r:#04x}")

    def status(self):
        self.t.write(bytes([P.CMD_STATUS]))
        s = self.t.read(1)[0]
        if s & ~(P.STATUS_BUSY | P.STATUS_DONE):
            raise BridgeError("status", f"unexpected reply {s:#04x}")
        return {"busy": bool(s & P.STATUS_BUSY), "done": bool(s & P.STATUS_DONE)}

    def cycles(self):
        self.t.write(bytes([P.CMD_CYCLES]))
        return int.from_bytes(self.t.read(P.CYCLES_BYTES), "little")

    # --- conveniences over the manifest --------------------------------------------------------
    def wait(self, max_cycles=1_000_000, timeout=None):
        """Poll until ``done`` (True) or until ``max_cycles`` board cycles plus ``timeout`` seconds pass."""
        slack = 0.5 if timeout is None else float(timeout)
        deadline = self.t.now() + max_cycles / self.clock_hz + slack
        while True:
            s = self.status()
            if s["done"] and not s["busy"]:
                return True
            if self.t.now() > deadline:
                return False

    def load(self, images):
        """Write ``{memory name: raw words}`` into the memories."""
        for name, words in images.items():
            if name not in self.memories:
                raise BridgeError(f"memory {name}", "not in the manifest")
            if words:
                self.write(self.memories[name]["sel"], 0, words)

    def register(self, name):
        return self.read(self.reg_sel, self.registers_map[name], 1)[0]

    def registers(self):
        names = sorted(self.registers_map, key=self.registers_map.get)
        words = self.read(self.reg_sel, 0, len(names))
        return dict(zip(names, words))

    def run(self, images, max_cycles=1_000_000, read_probes=None):
        """Load ``images``, start, wait for done, read registers and every written tensor.

        Returns :func:`fuseflow.hw.top.host_run`'s dict (``done``, ``cycles``, ``kernel_cycles``, ``tensors``...)."""
        from ..hw.top import host_run
        if not self.connected:
            self.connect()
        return _run_sync(host_run(_ClientDriver(self), self.manifest, images, max_cycles, read_probes))


class _ClientDriver:
    """:class:`fuseflow.hw.top.HostDriver` over a :class:`BridgeClient` (its coroutines never suspend)."""

    def __init__(self, client):
        self.c = client

    def now(self):
        return self.c.t.now()

    async def write_burst(self, sel, base, words):
        self.c.write(sel, base, words)

    async def read_burst(self, sel, base, n):
        return self.c.read(sel, base, n)

    async def pulse_start(self):
        self.c.start()

    async def wait_done(self, max_cycles):
        return self.c.wait(max_cycles)


def _run_sync(coro):
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("host_run waited on something other than the client")


def images_for(program, manifest, inputs):
    """Raw memory images ``{memory name: words}`` of ``inputs`` for the build ``manifest`` describes
    (HardwareError when they do not fit its capacities)."""
    from ..hw.elaborate import load_program, packed_inputs
    from ..hw.memory import plan_memories, tensor_images
    program = load_program(program)
    caps = {t["name"]: t["capacity"] for t in manifest["tensors"]}
    plan = plan_memories(program, caps)
    want = {m["name"]: (m["sel"], m["depth"], m["width"]) for m in manifest["host"]["memories"]}
    have = {m.name: (m.sel, m.depth, m.width) for m in plan.memories}
    if want != have:
        raise BridgeError("manifest", "its memories do not match the program's: a manifest of another graph?")
    images = {}
    for name, p in packed_inputs(program, inputs).items():
        images.update(tensor_images(plan, name, p))
    return images
