"""Token layout and encode/decode (DESIGN.md section 7)."""

import pytest
from amaranth.hdl import Module, Signal, Value
from amaranth.lib import data
from amaranth.sim import Simulator
from hypothesis import given, strategies as st

from fuseflow.errors import StreamError
from fuseflow.hw import token as T
from fuseflow.hw.testing import hw_settings


def test_onyx_bit_layout():
    # 17-bit word for W=16: data in [15:0], ctrl at bit 16; kind in data[9:8], level in [7:0]
    assert T.token_layout(16).size == 17
    assert T.encode(5, 16) == 5
    assert T.encode("S0", 16) == 1 << 16
    assert T.encode("S3", 16) == (1 << 16) | 3
    assert T.encode("D", 16) == (1 << 16) | (1 << 8)
    assert T.encode("N", 16) == (1 << 16) | (2 << 8)
    assert T.encode("R", 16) == 0
    assert T.encode("S", 16) == 1 << 16
    assert T.encode(-1, 32, signed=True) == 0xFFFFFFFF
    assert T.token_layout(32).size == 33
    assert T.token_layout(8).size == 11          # data field at least 10 bits


def test_decode_repsig_and_values():
    assert T.decode(0, 16, repsig=True) == "R"
    assert T.decode(1 << 16, 16, repsig=True) == "S"
    assert T.decode((1 << 16) | (1 << 8), 16, repsig=True) == "D"
    assert T.decode(0xFFFFFFFF, 32, signed=True) == -1
    assert T.decode(T.encode(-3, 8, signed=True), 8, signed=True) == -3


def test_encode_rejects():
    with pytest.raises(StreamError):
        T.encode(1 << 16, 16)
    with pytest.raises(StreamError):
        T.encode(-1, 16)
    with pytest.raises(StreamError):
        T.encode("X", 16)
    with pytest.raises(StreamError):
        T.encode(1 << 31, 32, signed=True)


tokens16 = st.one_of(st.integers(0, (1 << 16) - 1), st.sampled_from(["D", "N"]),
                     st.integers(0, 255).map(lambda n: f"S{n}"))


@hw_settings(200)
@given(tokens16)
def test_roundtrip_unsigned(tok):
    assert T.decode(T.encode(tok, 16), 16) == tok


@hw_settings(200)
@given(st.integers(2, 32).flatmap(lambda w: st.tuples(st.just(w), st.integers(-(1 << (w - 1)), (1 << (w - 1)) - 1))))
def test_roundtrip_signed(wv):
    w, v = wv
    assert T.decode(T.encode(v, w, signed=True), w, signed=True) == v


def test_rtl_predicates():
    lay = T.token_layout(16)
    tok = Signal(lay)
    outs = {n: Signal(name=n) for n in ("stop", "done", "empty", "data", "de")}
    lvl = Signal(8)
    m = Module()
    m.d.comb += [outs["stop"].eq(T.is_stop(tok)), outs["done"].eq(T.is_done(tok)),
                 outs["empty"].eq(T.is_empty(tok)), outs["data"].eq(T.is_data(tok)),
                 outs["de"].eq(T.is_data_or_empty(tok)), lvl.eq(T.stop_level(tok))]
    sim = Simulator(m)
    cases = {7: "data", "S0": "stop", "S5": "stop", "D": "done", "N": "empty"}

    async def tb(ctx):
        for t, kind in cases.items():
            ctx.set(Value.cast(tok), T.encode(t, 16))
            got = {n: ctx.get(s) for n, s in outs.items()}
            assert got[kind] == 1
            assert sum(got[n] for n in ("stop", "done", "empty", "data")) == 1
            assert got["de"] == (kind in ("data", "empty"))
            if kind == "stop":
                assert ctx.get(lvl) == int(t[1:])
    sim.add_testbench(tb)
    sim.run()


def test_rtl_constants_match_python():
    assert T.DONE.value == T.encode("D", 16) & 0x3FF
    assert T.EMPTY.value == T.encode("N", 16) & 0x3FF
    assert T.const_stop(4).value == T.encode("S4", 16) & 0x3FF
