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
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        raise GraphError(_json_path(error.absolute_path), error.message)
    try:
        return Program.from_json(doc).validate()
    except KeyError as exc:          # only reachable for documents the schema lets through oddly
        raise GraphError("$", f"missing field {exc}") from None


def load(path):
    """Read and validate ``graph.json``; errors name the file, the JSON path and the reason."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise GraphError(str(path), exc.strerror or str(exc)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphError(str(path), f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    try:
        return from_dict(doc)
    except GraphError as exc:
        raise GraphError(f"{path}: {exc.what}", exc.why) from None


def dumps(program):
    program.validate()
    return json.dumps(program.to_json(), indent=1) + "\n"


def save(program, path):
    """Validate and write ``program`` atomically."""
    text = dumps(program)
    with atomic_write(path) as f:
        f.write(text)
