"""Model-like data for the example ML programs (``fuseflow/programs/``, NumPy only): realistic scales instead of uniform
random numbers, so that fixed-point runs stay in range and their error against float is meaningful.

``example_inputs(name, tensors, seed)`` returns {tensor name: dense array} for the inputs of the example
program ``name`` (``decoder``, ``autoencoder``, ``graphsage2``), given their shapes; other programs get
``None`` (callers fall back to uniform random data). The scales follow common initialisations:

* weights ``W(fan_in, ...)``: normal with standard deviation ``1/sqrt(fan_in)``; pruned weights (the
  autoencoder's compressed ``W1``-``W3``) keep 40% of the entries (60% zeros);
* layer-norm gains near 1 and biases near 0; activations and features standard normal;
* adjacency (GraphSAGE): a 0/1 matrix with 3 random neighbours per node plus a ring edge, so that every
  node has a neighbour (the mean aggregator divides by the degree).
"""

from __future__ import annotations

import numpy as np

#: fraction of the pruned weights that are kept (the rest are zeros, not stored)
PRUNED_KEEP = 0.4


def _weights(shape, fan_in, rng, keep=1.0):
    w = rng.normal(0.0, 1.0 / np.sqrt(fan_in), size=shape)
    if keep < 1.0:
        w = np.where(rng.random(shape) < keep, w, 0.0)
    return w


def _adjacency(n, rng, neighbours=3):
    a = np.zeros((n, n))
    for i in range(n):
        a[i, rng.choice(n, size=neighbours, replace=False)] = 1.0
        a[i, (i + 1) % n] = 1.0
    return a


def _decoder(shapes, rng):
    out = {}
    for name, shape in shapes.items():
        if name.startswith("W"):
            fan_in = shape[0] if len(shape) == 2 else (shape[1] if name != "WO" else shape[0] * shape[1])
            out[name] = _weights(shape, fan_in, rng)
        elif name.startswith("G"):
            out[name] = 1.0 + 0.1 * rng.normal(size=shape)
        elif name.startswith(("B", "c")):
            out[name] = 0.1 * rng.normal(size=shape)
        else:
            out[name] = rng.normal(size=shape)
    return out


def _autoencoder(shapes, rng):
    out = {}
    for name, shape in shapes.items():
        if name.startswith("W"):
            out[name] = _weights(shape, shape[0], rng, keep=PRUNED_KEEP) * 2.0   # pruned: rescale the rest
        elif name.startswith("b"):
            out[name] = 0.1 * rng.normal(size=shape)
        else:
            out[name] = np.maximum(rng.normal(size=shape), 0.0) + 0.1 * rng.random(shape)
    return out


def _graphsage(shapes, rng):
    out = {}
    for name, shape in shapes.items():
        if name == "A":
            out[name] = _adjacency(shape[0], rng)
        elif name.startswith("W"):
            out[name] = _weights(shape, shape[0], rng)
        else:
            out[name] = rng.normal(size=shape)
    return out


MODELS = {"decoder": _decoder, "autoencoder": _autoencoder, "graphsage2": _graphsage}


def example_inputs(name: str, shapes: dict, seed: int = 0):
    """Inputs for the example program ``name`` ({tensor: shape} of its inputs), or None if it has no model
    data."""
    make = MODELS.get(name)
    if make is None:
        return None
    rng = np.random.default_rng(seed)
    return make({k: tuple(v) for k, v in sorted(shapes.items())}, rng)


#: density and seed of the uniform random inputs of the other programs (the correlation suites' compiled entries)
RANDOM_DENSITY = 0.3
RANDOM_SEED = 7


def program_inputs(program, name: str | None = None, density: float = RANDOM_DENSITY, seed: int = RANDOM_SEED):
    """Deterministic inputs for every input tensor of the SAMML ``program``, from its declared shapes and formats:
    model-scale data when ``name`` (default: the program's name) is an example ML program (:func:`example_inputs`),
    else uniform random data (:func:`fuseflow.samml.kernels.random_inputs`: sparse operands at ``density``, dense
    ones full). Returns ``(inputs, kind)`` with kind ``"model"`` or ``"random"``."""
    from ..samml.kernels import random_inputs
    from ..samml.tileplan import full_view
    program = full_view(program)              # a tiled program's data has the full shapes
    inputs = example_inputs(name or program.name, {t.name: t.shape for t in program.inputs}, seed=seed)
    if inputs is not None:
        return inputs, "model"
    return random_inputs(program, density=density, seed=seed), "random"


__all__ = ["example_inputs", "program_inputs", "MODELS", "PRUNED_KEEP", "RANDOM_DENSITY", "RANDOM_SEED"]
