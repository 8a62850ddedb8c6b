"""The generated op reference: ``docs/reference/ops.md`` rendered from the op registry.

Every fact on the page comes from :mod:`fuseflow.samml.registry` (ports, stream kinds, parameters, latency,
initiation interval, input depth, memory role, timing) or from where an op's implementations live (the Python
model ``fuseflow/sim/ops/<op>.py``, the compiled model registered with ``FF_REGISTER_OP`` in
``fuseflow/sim/csrc/**/*.cpp``, the RTL ``fuseflow/hw/ops/<op>.py``, the prose section in ``docs/samml.md``).
Data flows one way: this module reads the registry, the registry never imports it.

Regenerate with ``python -m fuseflow.samml reference -o docs/reference/ops.md`` (``make docs``);
``tests/samml/test_reference.py`` checks that the committed page is current.
"""

import itertools
import posixpath
import re
from pathlib import Path

from ..errors import FuseFlowError
from ..tensors.fixed import FixedFormat
from . import registry
from .registry import OPS, POLY_KINDS, REQUIRED

#: where the committed page lives, relative to the repository root
DEFAULT_PATH = "docs/reference/ops.md"
#: prose is wrapped at this many characters (tables are not)
WIDTH = 120
#: values tried for a required integer parameter without choices (those at or above its minimum)
INT_SAMPLES = (1, 2, 4, 8)

_PACKAGE = Path(__file__).resolve().parents[1]          # fuseflow/ (its parent: the repository)
_REGISTER = re.compile(r"^\s*FF_REGISTER_OP\(\s*(\w+)\s*,", re.M)


# ---- where an op is implemented -------------------------------------------------------------------------

def compiled_models(package=_PACKAGE):
    """``{op: path}`` of the compiled engine's models: the ``FF_REGISTER_OP(name, ...)`` lines of
    ``fuseflow/sim/csrc/**/*.cpp`` (one file may register several ops; paths relative to the repository)."""
    found = {}
    for path in sorted((package / "sim" / "csrc").rglob("*.cpp")):
        for name in _REGISTER.findall(path.read_text()):
            found.setdefault(name, path.relative_to(package.parent).as_posix())
    return found


def implementations(name, package=_PACKAGE, compiled=None):
    """The places of op ``name`` beside its registry entry: ``{"python", "compiled", "rtl", "docs"}`` -> a
    repository-relative path (``docs``: ``docs/samml.md#<op>``), or None where there is none."""
    compiled = compiled_models(package) if compiled is None else compiled
    root = package.parent

    def existing(rel):
        return rel if (root / rel).is_file() else None

    samml = root / "docs" / "samml.md"
    headings = set(re.findall(r"^## (\S+)\s*$", samml.read_text(), re.M)) if samml.is_file() else set()
    return {
        "python": existing(f"fuseflow/sim/ops/{name}.py"),
        "compiled": compiled.get(name),
        "rtl": existing(f"fuseflow/hw/ops/{name}.py"),
        "docs": f"docs/samml.md#{name}" if name in headings else None,
    }


# ---- facts that depend on parameters ----------------------------------------------------------------------

def _samples(p):
    """The values of parameter ``p`` that the tables try: its choices, a few sizes for a required integer,
    else its default (absent when it has none)."""
    if p.choices:
        return list(p.choices)
    if p.type == "int" and p.required:
        low = p.minimum if p.minimum is not None else 1
        return [v for v in INT_SAMPLES if v >= low] or [low]
    if p.required or p.default is None:
        return [None]
    return [p.default]


def vary(spec, fn):
    """How ``fn(params)`` depends on the op's parameters, over :func:`_samples` of each.

    Returns ``(names, rows)``: the fewest parameter names that decide the result and ``[(values, result)]``
    (one row per distinct combination of their values, in sample order). Combinations where ``fn`` raises a
    :class:`~fuseflow.errors.FuseFlowError` are left out."""
    names = [p.name for p in spec.params]
    table = []
    for combo in itertools.product(*(_samples(p) for p in spec.params)):
        params = {k: v for k, v in zip(names, combo) if v is not None}
        try:
            table.append((combo, fn(params)))
        except FuseFlowError:
            continue
    keep = list(range(len(names)))
    for i in range(len(names)):                     # drop every parameter the result does not depend on
        trial = [j for j in keep if j != i]
        first = {}
        if all(first.setdefault(tuple(c[j] for j in trial), r) == r for c, r in table):
            keep = trial
    rows, seen = [], set()
    for combo, result in table:
        key = tuple(combo[j] for j in keep)
        if key not in seen:
            seen.add(key)
            rows.append((key, result))
    return [names[j] for j in keep], rows


def _group(rows):
    """``[(values, result)]`` of one parameter grouped by result: ``[([value, ...], result)]``."""
    out = []
    for (value,), result in rows:
        for values, seen in out:
            if seen == result:
                values.append(value)
                break
        else:
            out.append(([value], result))
    return out


def _fixed_formats():
    """The default value format (the tables') and a narrower one (to tell which latencies depend on it)."""
    return FixedFormat(), FixedFormat(16, 8)


# ---- markdown --------------------------------------------------------------------------------------------

def _escape(text, table=False):
    """``text`` as markdown: a single ``*`` (and ``|`` in a table cell) escaped outside code spans."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"(?<!\*)\*(?!\*)", r"\\*", parts[i])
        if table:
            parts[i] = parts[i].replace("|", r"\|")
    return "`".join(parts)


_LINE_START = re.compile(r"^([-+*]|[>#=|].*|\d+[.)]|```.*)$")


def wrap(text, width=WIDTH):
    """``text`` (markdown prose) wrapped at ``width`` characters, never starting a line with a word that
    markdown would read as a list item, quote, heading or table (``- 1``, ``>= 2``, ``2.``)."""
    lines, line = [], []
    for word in _escape(text).split():
        if line and len(" ".join(line + [word])) > width:
            carry = [word]
            while _LINE_START.match(carry[0]) and len(line) > 1:
                carry.insert(0, line.pop())
            lines.append(" ".join(line))
            line = carry
        else:
            line.append(word)
    if line:
        lines.append(" ".join(line))
    return "\n".join(lines)


def _code(value):
    return f"`{value}`"


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def _link(rel, text=None):
    if not rel:
        return "—"
    path, _, anchor = rel.partition("#")
    target = posixpath.relpath(path, posixpath.dirname(DEFAULT_PATH)) + (f"#{anchor}" if anchor else "")
    return f"[{text or posixpath.basename(path)}]({target})"


def _first_sentence(text):
    m = re.search(r"(?<=\.)\s+(?=[A-Z])", text)
    return text[:m.start()] if m else text


def _alternatives(words, code=False):
    """``a``, ``a or b``, ``a, b or c``."""
    words = [f"`{w}`" if code else w for w in words]
    return " or ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + " or " + words[-1]


def _kind(kind):
    if kind in POLY_KINDS:
        return f"{kind} ({_alternatives(POLY_KINDS[kind])})"
    return kind


def _expansion(port):
    """``crd0 .. crd{arity-1}`` for a variadic port, else empty."""
    if port.count is None:
        return ""
    prefix, suffix = port.name.split("{i}")
    last = f"{port.count}-{1 - port.count_offset}"
    return f"`{prefix}0{suffix}` .. `{prefix}{{{last}}}{suffix}`"


_BOUNDS = {"zero": "only 0", "dim": "coordinates below `dim`", "positions": "positions of its level"}


def _data(port):
    """What an output's data tokens are (read by the widths pass): the inputs it passes on, or its bound."""
    if port.carries:
        return "tokens of " + ", ".join(_code(c) for c in port.carries)
    if port.bound:
        return _BOUNDS.get(port.bound, port.bound)
    return ""


def _default(p):
    if p.default is REQUIRED:
        return "required"
    if p.default is None:
        return "—"
    return _code(p.default)


def _number(n):
    if n >= 1024 and n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    return str(n)


def _range(p):
    parts = []
    if p.minimum is not None:
        parts.append(f">= {p.minimum}")
    if p.graph_minimum is not None:
        parts.append(f">= {p.graph_minimum} in a graph")
    if p.limit is not None:
        parts.append(f"<= {_number(p.limit.default)} (`{p.limit.env}`)")
    return ", ".join(parts)


def _by_param(title, names, rows, render=str):
    """A fact that depends on parameters: one line when it does not, else a table of its values."""
    if not names:
        return f"**{title}**: {render(rows[0][1])}."
    if len(names) == 1:
        body = [(", ".join(_code(v) for v in values), render(result)) for values, result in _group(rows)]
    else:
        body = [tuple(_code(v) for v in values) + (render(result),) for values, result in rows]
    return f"**{title}**:\n\n" + _table([_code(n) for n in names] + [title.lower()], body)


def _cycles(n):
    return f"{n} cycle" + ("" if n == 1 else "s")


# ---- the page --------------------------------------------------------------------------------------------

def _summary(compiled):
    rows = []
    for name, spec in OPS.items():
        places = implementations(name, compiled=compiled)
        rows.append((f"[{name}](#{name})", _escape(_first_sentence(spec.doc), table=True),
                     _link(places["python"]), _link(places["compiled"]), _link(places["rtl"]),
                     _link(places["docs"], "samml.md")))
    return _table(("op", "what it does", "Python model", "compiled model", "RTL", "prose"), rows)


def _ports(ports, outputs):
    rows = []
    for p in ports:
        kind = _kind(p.kind) + (", optional" if p.optional else "")
        row = [_code(p.name), kind, _expansion(p)]
        if outputs:
            row.append(_data(p))
        rows.append(tuple(row) + (_escape(p.doc, table=True),))
    header = ["port", "kind", "expands to"] + (["data"] if outputs else []) + ["doc"]
    return _table(header, rows)


def _params(params):
    rows = [(_code(p.name), p.type, _default(p), ", ".join(_code(c) for c in p.choices), _range(p),
             _escape(p.doc, table=True)) for p in params]
    return _table(("parameter", "type", "default", "choices", "range", "doc"), rows)


def _latency(spec):
    base, other = _fixed_formats()
    names, rows = vary(spec, lambda params: registry.op_latency(spec.name, params, base))
    out = [_by_param("Latency", names, rows, _cycles)]
    _, both = vary(spec, lambda params: (registry.op_latency(spec.name, params, base),
                                         registry.op_latency(spec.name, params, other)))
    differ = [(values, b) for values, (a, b) in both if a != b]
    if differ:
        out.append(wrap("Depends on the value format for " + ", ".join(
            " ".join(_code(v) for v in values) for values, _ in differ) + f" (at {other.width}/{other.frac}: "
            + ", ".join(" ".join(map(str, values)) + f" {_cycles(b)}" for values, b in differ) + ")."))
    return out


def _interval(spec):
    names, rows = vary(spec, lambda params: registry.op_interval(spec.name, params))
    if all(result == 1 for _, result in rows):      # (also when there are no rows)
        return []
    return [_by_param("Initiation interval", names, rows, _cycles)]


def _facts(spec):
    out = []
    if spec.input_depth is not None:
        where = (f"at arity <= {spec.input_depth_arity}, none wider" if spec.input_depth_arity is not None
                 else "at every arity")
        out.append(wrap(f"**Input depth**: every input channel needs depth {spec.input_depth} for the op's "
                        f"full rate (look-ahead), {where} (`input_depth_for`)."))
    if spec.coiterate is not None:
        which = {"all": "present in every input", "any": "present in any input"}.get(spec.coiterate, "")
        out.append(f"**Co-iteration**: `{spec.coiterate}`: emits the coordinates {which}.")
    if spec.lane_role is not None:
        what = {"split": "splits one stream across lanes", "merge": "merges lanes into one stream"}
        out.append(f"**Lanes**: `{spec.lane_role}`: {what.get(spec.lane_role, spec.lane_role)}.")
    if spec.memory:
        role = {"read": "reads a tensor memory", "write": "writes a tensor memory"}.get(spec.memory, spec.memory)
        out.append(f"**Memory**: `{spec.memory}`: {role}.")
        if spec.memory == "read":
            names, rows = vary(spec, lambda params: registry.memory_read_latency(spec.name, params))
            out.append(_by_param("Memory read latency", names, rows, _cycles))
    if spec.sim_facts is not None:
        names, rows = vary(spec, lambda params: spec.sim_facts(params, f"op {spec.name}"))

        def render(facts):
            return ", ".join(f"`{k}` = {v}" for k, v in sorted(facts.items()))
        if rows:                                    # none when no sampled parameters are valid
            out.append(_by_param("Simulator facts", names, rows, render))
    return out


def _section(spec, compiled):
    places = implementations(spec.name, compiled=compiled)
    labels = (("python", "Python model"), ("compiled", "compiled model"), ("rtl", "RTL"), ("docs", "prose"))
    parts = [f"## {spec.name}", wrap(spec.doc),
             wrap("Implementations: " + ", ".join(
                 f"{label} {_link(places[key], places[key] and places[key].split('#')[0])}"
                 for key, label in labels) + ".")]
    if spec.inputs:
        parts += ["**Inputs**:", _ports(spec.inputs, outputs=False)]
    if spec.outputs:
        parts += ["**Outputs**:", _ports(spec.outputs, outputs=True)]
    if spec.params:
        parts += ["**Parameters**:", _params(spec.params)]
    parts += _latency(spec) + _interval(spec) + _facts(spec)
    if spec.timing:
        parts.append(wrap("**Timing**: " + spec.timing))
    return "\n\n".join(parts)


def render():
    """The whole of ``docs/reference/ops.md`` as a string."""
    compiled = compiled_models()
    kinds = "; ".join(f"`{k}` is {_alternatives(vs, code=True)}" for k, vs in POLY_KINDS.items())
    base, _ = _fixed_formats()
    intro = [
        "<!-- Generated from fuseflow/samml/registry.py by `python -m fuseflow.samml reference -o "
        f"{DEFAULT_PATH}`\n     (make docs). Do not edit: tests/samml/test_reference.py checks it is current. -->",
        "# Op reference",
        wrap("Every SAMML op of the registry (`fuseflow/samml/registry.py`): its ports, parameters, latency and "
             "timing, and the files that implement it. This page is generated from the registry; the token "
             "rules, examples and design notes of each op are in [samml.md](../samml.md), and adding an op is "
             "described in [simulator.md](../simulator.md#adding-an-op)."),
        wrap("Stream kinds: `crd` (coordinates), `ref` (references), `val` (values), `repsig` (repeat signals); "
             f"{kinds}, and an output of such a kind has the kind of the matching input. A variadic port "
             "(`crd{i}`) expands to one port per index, counted by the parameter shown. An output's data column "
             "says which inputs' tokens it passes on or what bounds its data (the widths pass, "
             "`fuseflow/samml/widths.py`)."),
        wrap("**Latency** (`op_latency(op, params, fixed)`) is the number of cycles from a firing to its output "
             "token being visible downstream when nothing stalls, shown at the parameter values that change it "
             f"(the alu's in the default value format, {base.width}/{base.frac}). **Initiation interval** "
             "(`op_interval`, shown where it is above 1) is the number of cycles between two firings that "
             "compute. **Memory read latency** (`memory_read_latency`) is the part of the latency spent reading "
             f"a tensor memory (`MEMORY_READ_LATENCY` = {registry.MEMORY_READ_LATENCY} where the read is "
             "registered). **Input depth** (`input_depth_for`) is the channel depth every input needs for the "
             "op's full rate. **Simulator facts** (`OpSpec.sim_facts`) are bound from the registry as node "
             "parameters of the compiled engine. **Co-iteration** (`OpSpec.coiterate`) and **Lanes** "
             "(`OpSpec.lane_role`) are the roles generic code asks for instead of an op's name. The contract "
             "behind these numbers is in "
             "[samml.md](../samml.md#timing-contract)."),
        "## Ops",
        _summary(compiled),
    ]
    sections = [_section(spec, compiled) for spec in OPS.values()]
    return "\n\n".join(intro + sections + [_transfer(registry.DMA)]) + "\n"


def _transfer(spec):
    """The off-chip tile transfer (not a stream op): doc, parameters, timing."""
    return "\n\n".join([
        f"## {spec.name} (off-chip tile transfer)", wrap(spec.doc),
        wrap("Not a node of a kernel: a tiled program's plan (graph.json `tiling`, "
             "[tiling.md](../tiling.md)) runs each kernel once per tile with these transfers around it; its "
             "parameters are the plan's `contract` (`fuseflow/samml/offchip.py`: `OffchipContract`)."),
        "**Parameters**:", _params(spec.params), wrap("**Timing**: " + spec.timing)])

