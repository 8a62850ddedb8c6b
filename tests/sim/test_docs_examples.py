"""Every ``samml-example`` in docs/samml.md runs through run_op: tokens and cycle counts must match."""

import json
import pathlib
import re

import pytest

from fuseflow.samml.registry import OPS
from fuseflow.sim import run_op

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "samml.md"
TEXT = DOC.read_text()


def _token(text):
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def _tokens(text):
    """Comma-separated tokens; a bracketed token (``[[1.0, 2.0], [3.0, 4.0]]``) is a block, parsed as JSON."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            part = text[start:i].strip()
            if part:
                out.append(json.loads(part) if part.startswith("[") else _token(part))
            start = i + 1
    return out


def _plain(tokens):
    """Output tokens with blocks as nested lists (a block compares element-wise)."""
    return [t.tolist() if hasattr(t, "tolist") else t for t in tokens]


def parse_examples():
    examples = []
    for m in re.finditer(r"```samml-example\n(.*?)```", TEXT, re.S):
        ex = {"inputs": {}, "outputs": {}, "params": {}, "line": TEXT[:m.start()].count("\n") + 1}
        for line in m.group(1).splitlines():
            key, _, value = line.partition(":")
            if key == "op":
                ex["op"] = value.strip()
            elif key == "params":
                ex["params"] = json.loads(value)
            elif key == "cycles":
                ex["cycles"] = int(value)
            elif key.startswith("in "):
                ex["inputs"][key[3:]] = _tokens(value)
            elif key.startswith("out "):
                ex["outputs"][key[4:]] = _tokens(value)
        examples.append(ex)
    return examples


EXAMPLES = parse_examples()


def test_every_op_has_examples():
    assert {ex["op"] for ex in EXAMPLES} == set(OPS)


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda ex: f"{ex['op']}@line{ex['line']}")
def test_example(ex):
    outputs, info = run_op(ex["op"], ex["params"], ex["inputs"], stats=True)
    for port, want in ex["outputs"].items():
        assert _plain(outputs[port]) == want, f"{ex['op']} port {port}"
    assert info["cycles"] == ex["cycles"]


@pytest.mark.parametrize("op", sorted(OPS))
def test_section_lists_registry_ports(op):
    """Each op's section names exactly the registry's port templates."""
    section = TEXT.split(f"\n## {op}\n", 1)[1].split("\n## ", 1)[0]
    spec = OPS[op]
    for port in spec.inputs + spec.outputs:
        assert f"`{port.name}`" in section, f"docs/samml.md section {op} does not list port {port.name}"
