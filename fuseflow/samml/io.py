"""Load, validate and save ``graph.json`` (JSON Schema first, then the registry's semantic checks)."""

import json
from functools import lru_cache
from importlib import resources

import jsonschema

from ..cli import atomic_write
from ..errors import GraphError
from .graph import Program


@lru_cache(maxsize=1)
def schema():
    """The JSON Schema of graph.json shipped in the package."""
    return json.loads(resources.files(__package__).joinpath("graph.schema.json").read_text())


def _json_path(path):
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def from_dict(doc):
    """Validate a parsed document against the schema and the registry; return a :class:`Program`."""
    _check_sizes(doc)
    validator = jsonschema.Draft202012Validator(schema())
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    except RecursionError:
        raise GraphError("$", "nested too deeply") from None
    if error is not None:
        raise GraphError(_json_path(error.absolute_path), error.message)
    try:
        return Program.from_json(doc).validate()
    except KeyError as exc:          # only reachable for documents the schema lets through oddly
        raise GraphError("$", f"missing field {exc}") from None


def _check_sizes(doc):
    """Node and stream counts before anything is built from them (see fuseflow.limits)."""
    from .. import limits
    from .graph import _limit
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels"), list):
        return
    kernels = [k for k in doc["kernels"] if isinstance(k, dict)]
    nodes = sum(len(k["nodes"]) for k in kernels if isinstance(k.get("nodes"), list))
    streams = sum(len(k["streams"]) for k in kernels if isinstance(k.get("streams"), list))
    _limit(limits.NODES, nodes, "$.kernels")
    _limit(limits.STREAMS, streams, "$.kernels")


def load(path):
    """Read and validate ``graph.json``; errors name the file, the JSON path and the reason."""
    doc = load_json(path, GraphError)
    try:
        return from_dict(doc)
    except GraphError as exc:
        raise GraphError(f"{path}: {exc.what}", exc.why) from None


def load_json(path, error=GraphError):
    """Parse a JSON file; every way it can fail (missing, not text, not JSON, nested too deeply, a number too
    long to convert) is ``error(path, why)``."""
    path = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise error(path, exc.strerror or str(exc)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(path, f"not a UTF-8 text file ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(path, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise error(path, "not valid JSON: nested too deeply") from None
    except ValueError as exc:                     # e.g. an integer literal of more than 4300 digits
        raise error(path, f"not valid JSON: {exc}") from None


def dumps(program):
    """Validate ``program`` exactly as a loaded graph.json is validated (schema, then semantics) and return its
    JSON text: nothing is written that ``samml validate`` would reject."""
    doc = program.to_json()
    from_dict(json.loads(json.dumps(doc)))
    return json.dumps(doc, indent=1) + "\n"


def save(program, path):
    """Validate and write ``program`` atomically."""
    text = dumps(program)
    with atomic_write(path) as f:
        f.write(text)
