"""docs/reference/ops.md is generated from the registry (fuseflow.samml.reference) and kept current."""

import re
from pathlib import Path

import pytest

from fuseflow.samml import reference
from fuseflow.samml.__main__ import main
from fuseflow.samml.registry import OPS, OpSpec, Param, Port, op_latency

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / reference.DEFAULT_PATH


@pytest.fixture(scope="module")
def text():
    return reference.render()


def _section(text, name):
    m = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"no section for op {name}"
    return m.group(1)


def test_committed_page_is_current(text):
    if not PAGE.is_file():
        pytest.fail(f"{reference.DEFAULT_PATH} is missing: run make docs")
    assert PAGE.read_text() == text, (f"{reference.DEFAULT_PATH} is out of date with the registry: run make docs "
                                      f"(python -m fuseflow.samml reference -o {reference.DEFAULT_PATH})")


def test_every_op_has_a_section_and_a_row(text):
    for name in OPS:
        _section(text, name)
        assert re.search(rf"^\| \[{name}\]\(#{name}\) \|", text, re.M), name
    assert len(re.findall(r"^## ", text, re.M)) == len(OPS) + 2          # + "## Ops" and the dma transfer


def test_dma_transfer_section_lists_its_parameters(text):
    from fuseflow.samml.offchip import OffchipContract
    from fuseflow.samml.registry import DMA
    sec = text[text.index("## dma (off-chip tile transfer)"):]
    for p in DMA.params:
        assert f"| `{p.name}` | {p.type} | `{p.default}` |" in sec, p.name
    assert DMA.defaults() == OffchipContract().__dict__           # the contract's defaults are the registry's


def test_every_port_and_parameter_appears(text):
    for name, spec in OPS.items():
        sec = _section(text, name)
        for port in spec.inputs + spec.outputs:
            assert f"| `{port.name}` |" in sec, (name, port.name)
        for p in spec.params:
            assert f"| `{p.name}` | {p.type} |" in sec, (name, p.name)
            for choice in p.choices:
                assert f"`{choice}`" in sec, (name, p.name, choice)


def test_latency_values_come_from_the_registry(text):
    alu = _section(text, "alu")
    for op in ("add", "mul", "div", "rsqrt"):
        lat = op_latency("alu", {"op": op})
        row = next(line for line in alu.splitlines() if line.startswith("| ") and f"`{op}`" in line
                   and "cycle" in line)
        assert row.endswith(f"| {lat} cycle{'s' * (lat != 1)} |"), row
    bm = _section(text, "block_matmul")
    for b in (1, 2, 4, 8):
        assert f"| `{b}` | {op_latency('block_matmul', {'block': b})} cycles |" in bm
    assert "**Initiation interval**" in bm and "**Initiation interval**" not in _section(text, "alu")
    assert "| `compressed` | 2 cycles |" in _section(text, "level_scan")
    assert "depth 3" in _section(text, "intersect")


def test_implementations_are_found():
    compiled = reference.compiled_models()
    assert compiled["level_write"] == compiled["value_write"] == "fuseflow/sim/csrc/ops/writers.cpp"
    for name in OPS:
        places = reference.implementations(name, compiled=compiled)
        assert places["python"] == f"fuseflow/sim/ops/{name}.py"
        assert places["rtl"] == f"fuseflow/hw/ops/{name}.py"
        assert places["compiled"], name


def test_prose_is_wrapped(text):
    long = [line for line in text.splitlines()
            if len(line) > reference.WIDTH and not line.startswith("|")]
    assert long == []


def test_wrap_never_starts_a_line_as_markdown_block():
    words = "x " * 55 + "S_n (n >= 1) and B - 1 rows, 2. then"
    for width in range(20, 130):
        for line in reference.wrap(words, width).splitlines():
            assert not re.match(r"(>|[-+*] |\d+[.)] )", line), (width, line)


def test_vary_finds_what_a_fact_depends_on():
    spec = OpSpec("toy", "A toy.", inputs=(Port("a", "val"),),
                  params=(Param("k", "str", "x", ("x", "y")), Param("n", "int", doc="size"),
                          Param("m", "int", 3)))
    names, rows = reference.vary(spec, lambda p: len(p["k"]) * p["n"])
    assert names == ["n"] and rows == [((n,), n) for n in reference.INT_SAMPLES]
    names, rows = reference.vary(spec, lambda p: 1)
    assert names == [] and rows == [((), 1)]


def test_the_command_writes_the_page(tmp_path, capsys, text):
    out = tmp_path / "ops.md"
    assert main(["reference", "-o", str(out)]) == 0
    assert out.read_text() == text
    assert main(["reference"]) == 0
    assert capsys.readouterr().out.endswith(text)
