import itertools

import pytest

from fuseflow.errors import TensorError
from fuseflow.tensors.formats import COMPRESSED, DENSE, LEVEL_CAPABILITIES, TensorFormat, can_locate

D, C = DENSE, COMPRESSED


@pytest.mark.parametrize("name, order, levels, mode_order", [
    ("csr", None, (D, C), (0, 1)),
    ("csc", None, (D, C), (1, 0)),
    ("dcsr", 2, (C, C), (0, 1)),
    ("dcsc", None, (C, C), (1, 0)),
    ("csf", None, (C, C, C), (0, 1, 2)),
    ("csf", 2, (C, C), (0, 1)),
    ("dense", 3, (D, D, D), (0, 1, 2)),
    ("dense", None, (D, D), (0, 1)),
    ("dense", 0, (), ()),
    ("sparse", 1, (C,), (0,)),
    ("sparse", 3, (C, C, C), (0, 1, 2)),
    ("dv", None, (D,), (0,)),
    ("sv", 1, (C,), (0,)),
    ("scalar", None, (), ()),
    ("dc", None, (D, C), (0, 1)),
    ("cd", 2, (C, D), (0, 1)),
    ("ccc", None, (C, C, C), (0, 1, 2)),
    ("CSR", None, (D, C), (0, 1)),
])
def test_named(name, order, levels, mode_order):
    fmt = TensorFormat.named(name, order)
    assert fmt.levels == levels
    assert fmt.mode_order == mode_order
    assert fmt.order == len(levels)


def test_named_with_mode_order():
    fmt = TensorFormat.named("dcd", mode_order=(2, 0, 1))
    assert fmt.levels == (D, C, D) and fmt.mode_order == (2, 0, 1)
    assert fmt.level_of_mode == (1, 2, 0)
    assert fmt.level_dims((5, 6, 7)) == (7, 5, 6)


@pytest.mark.parametrize("spec, levels, mode_order", [
    ("dc:1,0", (D, C), (1, 0)),
    ("dc : 0,1", (D, C), (0, 1)),
    ("ds10", (D, C), (1, 0)),
    ("ss01", (C, C), (0, 1)),
    ("ccd:2,1,0", (C, C, D), (2, 1, 0)),
    ("csr", (D, C), (0, 1)),
    ("dense:1,0", (D, D), (1, 0)),
    ("", (), ()),
    (":", (), ()),
])
def test_parse(spec, levels, mode_order):
    fmt = TensorFormat.parse(spec)
    assert (fmt.levels, fmt.mode_order) == (levels, mode_order)


def test_parse_equivalent_spellings():
    assert TensorFormat.parse("dc:1,0") == TensorFormat.named("csc")
    assert TensorFormat.parse("cc:1,0") == TensorFormat.named("dcsc")
    assert TensorFormat.parse({"levels": ["dense", "compressed"], "mode_order": [1, 0]}) == \
        TensorFormat.named("csc")
    assert TensorFormat.parse(TensorFormat.named("csr"), 2) == TensorFormat.named("csr")


@pytest.mark.parametrize("bad, order", [
    ("csr", 3), ("csc", 1), ("dv", 2), ("sv", 0), ("scalar", 1), ("dc", 3), ("bogus", None),
    ("dx", None), ("dc:1,1", None), ("dc:0", None), ("dc:a,b", None), ("dc:0,2", None),
    ("csf", 0), ("csr:1,0", None), (3, None), ("dense", -1),
])
def test_parse_errors(bad, order):
    with pytest.raises(TensorError):
        TensorFormat.parse(bad, order)


@pytest.mark.parametrize("levels, mode_order", [
    (("dense", "sparse"), None), (("dense",), (0, 1)), ((D, C), (0, 0)), ("dc", None),
    ((D, C), "01"), ((D,), (True,)), ((D, C), (0, 1.5)),
])
def test_constructor_errors(levels, mode_order):
    with pytest.raises(TensorError):
        TensorFormat(levels, mode_order)


def test_error_is_one_line_with_what():
    with pytest.raises(TensorError) as info:
        TensorFormat.parse("nope")
    assert info.value.what == "format"
    assert "\n" not in str(info.value)


def all_formats(max_order=3):
    for order in range(max_order + 1):
        for levels in itertools.product((D, C), repeat=order):
            for mo in itertools.permutations(range(order)):
                yield TensorFormat(levels, mo)


def test_str_round_trips_for_every_format():
    seen = set()
    for fmt in all_formats():
        name = str(fmt)
        assert TensorFormat.parse(name, fmt.order) == fmt, name
        seen.add(name)
    for expected in ("csr", "csc", "dcsr", "dcsc", "csf", "dense", "dv", "sv", "scalar", "cd:1,0"):
        assert expected in seen


def test_short_names():
    assert str(TensorFormat.named("csr")) == "csr"
    assert str(TensorFormat.parse("dc:1,0")) == "csc"
    assert str(TensorFormat.named("dense", 3)) == "dense"
    assert str(TensorFormat.named("sparse", 3)) == "csf"
    assert str(TensorFormat.named("dcd", mode_order=(2, 0, 1))) == "dcd:2,0,1"
    assert repr(TensorFormat.named("csr")) == "TensorFormat('csr')"


def test_json_round_trip():
    for fmt in all_formats():
        d = fmt.to_json()
        assert set(d) == {"levels", "mode_order"}
        assert isinstance(d["levels"], list) and isinstance(d["mode_order"], list)
        assert TensorFormat.from_json(d) == fmt
    assert TensorFormat.from_json({"levels": ["compressed"]}) == TensorFormat.named("sv")


@pytest.mark.parametrize("bad", [
    None, [], {"mode_order": [0]}, {"levels": "dc"}, {"levels": ["dense"], "mode_order": [0.0]},
    {"levels": ["dense"], "mode_order": [True]}, {"levels": ["dense"], "extra": 1},
    {"levels": ["weird"]},
])
def test_json_errors(bad):
    with pytest.raises(TensorError):
        TensorFormat.from_json(bad)


def test_hashable_and_frozen():
    a = TensorFormat.named("csr")
    b = TensorFormat(["dense", "compressed"], [0, 1])
    assert a == b and hash(a) == hash(b)
    with pytest.raises(Exception):
        a.levels = ()


def test_level_capabilities():
    """Every level iterates; dense levels also locate (r*d + c), compressed ones cannot (TACO's capabilities)."""
    assert all("iterate" in caps for caps in LEVEL_CAPABILITIES.values())
    assert can_locate(DENSE) and not can_locate(COMPRESSED)
    csr = TensorFormat.named("csr")
    assert [csr.can_locate(k) for k in range(2)] == [True, False]
    assert [TensorFormat.named("dcsr").can_locate(k) for k in range(2)] == [False, False]
    with pytest.raises(TensorError):
        can_locate("bitmap")
