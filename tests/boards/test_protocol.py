"""Protocol encoding and the host client against a Python model of the bridge (no simulator)."""

import pytest

from fuseflow.boards import protocol as P
from fuseflow.boards.client import BridgeClient, BridgeError, _run_sync


def test_layout_from_widths():
    assert P.Layout.from_widths(1, 1, 1) == P.Layout(1, 1, 1)
    assert P.Layout.from_widths(4, 10, 32) == P.Layout(1, 2, 4)
    assert P.Layout.from_widths(9, 17, 33) == P.Layout(2, 3, 5)
    assert P.Layout(1, 2, 4).header_bytes == 5


def test_encode_write_and_read():
    L = P.Layout(1, 2, 4)
    assert P.encode_write(L, 3, 0x0102, [0x11223344, -1]) == (
        b"W\x03\x02\x01\x02\x00" + bytes([0x44, 0x33, 0x22, 0x11]) + b"\xff\xff\xff\xff")
    assert P.encode_read(L, 1, 5, 300) == b"R\x01\x05\x00\x2c\x01"
    assert P.decode_words(L, bytes(range(8))) == [0x03020100, 0x07060504]
    with pytest.raises(ValueError):
        P.encode_read(L, 0, 0, P.MAX_BURST + 1)


def test_ident_round_trip():
    L = P.Layout(1, 2, 4)
    data = P.ident_bytes(L, 0xA1B2C3D4)
    assert len(data) == P.IDENT_BYTES
    assert P.parse_ident(data) == {"version": P.VERSION, "layout": L, "build_id": 0xA1B2C3D4}
    with pytest.raises(ValueError):
        P.parse_ident(b"??" + data[2:])


def test_build_id_is_stable_and_sensitive(manifest):
    a = P.build_id(manifest)
    assert a == P.build_id(dict(manifest))
    other = dict(manifest, name="other")
    assert P.build_id(other) != a
    assert P.build_id(dict(manifest, unrelated="x")) == a       # only the hardware-relevant keys count


def client_for(model_bridge, manifest, **kw):
    L = P.Layout.from_manifest(manifest)
    t = model_bridge(L, build_id=P.build_id(manifest), **kw)
    return BridgeClient(t, manifest, clock_hz=1e6), t


def test_client_connect_write_read(model_bridge, manifest):
    c, t = client_for(model_bridge, manifest)
    info = c.connect()
    assert info["build_id"] == P.build_id(manifest)
    c.write(0, 2, [1, 2, 3])
    assert c.read(0, 1, 5) == [0, 1, 2, 3, 0]
    assert c.register("cycles") == 0
    c.start()
    assert c.status() == {"busy": False, "done": True}
    assert c.wait(max_cycles=10)
    assert c.cycles() == 42


def test_client_splits_long_bursts(model_bridge, manifest):
    manifest["host"]["addr_width"] = 20
    c, t = client_for(model_bridge, manifest)
    n = P.MAX_BURST + 10
    c.write(0, 0, range(n))
    writes = [s for s in t.sent if s[0] == P.CMD_WRITE]
    assert len(writes) == 2
    assert c.read(0, P.MAX_BURST - 2, 5) == list(range(P.MAX_BURST - 2, P.MAX_BURST + 3))


def test_client_reports_busy_kernel(model_bridge, manifest):
    c, t = client_for(model_bridge, manifest, busy=True)
    with pytest.raises(BridgeError, match="busy"):
        c.write(0, 0, [1])
    with pytest.raises(BridgeError, match="already running"):
        c.start()
    assert not c.wait(max_cycles=0, timeout=0)


def test_client_rejects_other_layout_and_id(model_bridge, manifest):
    L = P.Layout.from_manifest(manifest)
    c = BridgeClient(model_bridge(P.Layout(2, 2, 4), build_id=P.build_id(manifest)), manifest)
    with pytest.raises(BridgeError, match="field sizes"):
        c.connect()
    c = BridgeClient(model_bridge(L, build_id=7), manifest)
    with pytest.raises(BridgeError, match="build id"):
        c.connect()


def test_client_resyncs_after_lost_reply(model_bridge, manifest):
    c, t = client_for(model_bridge, manifest)
    t.drop_next_reply = True
    t.sleep = lambda s: None
    assert c.connect()["build_id"] == P.build_id(manifest)


def test_no_reply_is_a_one_line_error(model_bridge, manifest):
    c, t = client_for(model_bridge, manifest)
    t.drop_next_reply = True
    with pytest.raises(BridgeError) as e:
        c.status()
    assert "\n" not in str(e.value)


def test_run_sync_refuses_real_awaits():
    import asyncio

    async def waits():
        await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        _run_sync(waits())


def test_serial_transport_without_pyserial(monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **kw):
        if name == "serial":
            raise ImportError(name)
        return real(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", fake)
    from fuseflow.boards.client import SerialTransport
    with pytest.raises(BridgeError, match="pyserial"):
        SerialTransport("/dev/null")
