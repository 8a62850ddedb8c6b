"""Random test data: dense NumPy arrays with a chosen density of nonzeros (seeded by the caller's generator).

The one definition used by the kernel suite (:mod:`fuseflow.samml.kernels`), the channel-depth profile
(:mod:`fuseflow.compiler.passes.depths`), the autoscheduler and the hardware testbenches.
"""

import numpy as np


def random_sparse(rng, shape, density):
    """A random array with roughly ``density`` nonzeros (values in [-2, 2] \\ {0}, two decimals)."""
    mask = rng.random(shape) < density
    vals = np.round(rng.uniform(0.25, 2.0, shape), 2) * rng.choice([-1.0, 1.0], shape)
    return np.where(mask, vals, 0.0)
