"""The UART host-bridge protocol, shared by the gateware (:mod:`.bridge`) and the host client (:mod:`.client`).

One command at a time; the host waits for each reply before it sends the next command. Multi-byte fields are
little-endian. Field sizes come from the kernel top's host port (:class:`Layout`): ``S`` bytes of memory select,
``A`` bytes of address, ``D`` bytes of data word (``D = ceil(data_width / 8)``, normally 4).

======== ================================== ==========================================================
command  bytes sent by the host               reply
======== ================================== ==========================================================
``I``    ``'I'``                            ``'F' 'F' version S A D build_id[4]`` (10 bytes)
``W``    ``'W' sel[S] addr[A] n[2]``        ``'K'`` once the ``n`` words were written, or ``'B'`` if the
         then ``n`` words of ``D`` bytes    kernel was busy (the kernel top ignores host writes while
                                            busy); ``n = 0`` replies ``'K'`` at once
``R``    ``'R' sel[S] addr[A] n[2]``        ``n`` words of ``D`` bytes (entries ``addr .. addr+n-1``);
                                            ``n = 0`` replies nothing
``S``    ``'S'``                            ``'K'`` after pulsing ``start``, ``'B'`` if already busy
``Q``    ``'Q'``                            status byte: bit 0 busy, bit 1 done
``C``    ``'C'``                            the kernel top's ``cycles`` output (4 bytes)
other    one byte                           ``'?'``
======== ================================== ==========================================================

``sel`` is the manifest's memory ``sel`` (or ``reg_sel`` for the register file: status, cycles, per-kernel
cycles, writer counts), ``addr`` the entry. A command left incomplete (a lost byte) is dropped after
``timeout_bits`` bit-times of silence, so a host can resynchronise by waiting and sending ``I``.

``build_id`` is a CRC-32 of the build manifest (:func:`build_id`), so a client can tell that the bitstream
on the board is the one its manifest describes.
"""

import json
import zlib
from dataclasses import dataclass

VERSION = 1
MAGIC = b"FF"

CMD_IDENT = ord("I")
CMD_WRITE = ord("W")
CMD_READ = ord("R")
CMD_START = ord("S")
CMD_STATUS = ord("Q")
CMD_CYCLES = ord("C")
COMMANDS = (CMD_IDENT, CMD_WRITE, CMD_READ, CMD_START, CMD_STATUS, CMD_CYCLES)

ACK = ord("K")
BUSY = ord("B")
NAK = ord("?")

STATUS_BUSY = 1
STATUS_DONE = 2

#: words per W/R command (the count field is 16 bits)
MAX_BURST = 0xFFFF
IDENT_BYTES = 10
CYCLES_BYTES = 4
#: default silence (in bit times) after which the bridge drops an incomplete command
DEFAULT_TIMEOUT_BITS = 1024


def nbytes(bits):
    return max(1, (int(bits) + 7) // 8)


@dataclass(frozen=True)
class Layout:
    """Field sizes of the protocol for one kernel top (``sel``, ``addr``, data word), in bytes."""
    sel_bytes: int
    addr_bytes: int
    data_bytes: int

    @classmethod
    def from_widths(cls, sel_width, addr_width, data_width):
        return cls(nbytes(sel_width), nbytes(addr_width), nbytes(data_width))

    @classmethod
    def from_plan(cls, plan):
        return cls.from_widths(plan.sel_width, plan.addr_width, plan.data_width)

    @classmethod
    def from_manifest(cls, man):
        host = man["host"]
        return cls.from_widths(host["sel_width"], host["addr_width"], host["data_width"])

    @property
    def header_bytes(self):
        """Bytes after the command byte of W and R: sel, addr, count."""
        return self.sel_bytes + self.addr_bytes + 2


def le(value, n):
    return int(value).to_bytes(n, "little")


def encode_write(layout, sel, addr, words):
    words = list(words)
    if len(words) > MAX_BURST:
        raise ValueError(f"at most {MAX_BURST} words per write command")
    mask = (1 << (8 * layout.data_bytes)) - 1
    body = b"".join(le(int(w) & mask, layout.data_bytes) for w in words)
    return bytes([CMD_WRITE]) + le(sel, layout.sel_bytes) + le(addr, layout.addr_bytes) + le(len(words), 2) + body


def encode_read(layout, sel, addr, n):
    if not 0 <= n <= MAX_BURST:
        raise ValueError(f"at most {MAX_BURST} words per read command")
    return bytes([CMD_READ]) + le(sel, layout.sel_bytes) + le(addr, layout.addr_bytes) + le(n, 2)


def decode_words(layout, data):
    d = layout.data_bytes
    return [int.from_bytes(data[i:i + d], "little") for i in range(0, len(data), d)]


def ident_bytes(layout, bid):
    """The 10-byte reply to ``I``."""
    return MAGIC + bytes([VERSION, layout.sel_bytes, layout.addr_bytes, layout.data_bytes]) + le(bid, 4)


def parse_ident(data):
    """``{"version", "layout", "build_id"}`` from an ``I`` reply; ValueError if it is not one."""
    if len(data) != IDENT_BYTES or data[:2] != MAGIC:
        raise ValueError(f"not a FuseFlow bridge identification: {bytes(data)!r}")
    return {"version": data[2], "layout": Layout(data[3], data[4], data[5]),
            "build_id": int.from_bytes(data[6:10], "little")}


def build_id(manifest):
    """CRC-32 of the parts of a build manifest that the hardware depends on."""
    keys = ("name", "module", "baked", "config", "ports", "tensors", "kernels", "channels", "host")
    text = json.dumps({k: manifest.get(k) for k in keys}, sort_keys=True, separators=(",", ":"))
    return zlib.crc32(text.encode())
