"""An independent NumPy construction of every coordinate-mask pattern (the tests' golden masks)."""

import numpy as np


def numpy_mask(text, rows, cols):
    """The pattern built with NumPy's triangle helpers and block Kronecker products (not with masks.py)."""
    kind, _, rest = text.partition(":")
    p = {k: int(v) for k, v in (kv.split("=") for kv in rest.split(",") if kv)}
    ones = np.ones((rows, cols), dtype=bool)
    if kind == "causal":
        return np.tril(ones)
    if kind == "band":
        return np.tril(np.triu(ones, -p["w"]), p["w"])
    b, h = p["block"], p.get("window", 3) // 2
    g, r, seed = p.get("global", 1), p.get("random", 1), p.get("seed", 0)
    nbr, nbc = rows // b, cols // b
    blocks = np.zeros((nbr, nbc), dtype=bool)
    if p.get("window", 3):
        blocks |= np.tril(np.triu(np.ones((nbr, nbc), dtype=bool), -h), h)
    blocks[:, :g] = True
    blocks[:g, :] = True
    rng = np.random.default_rng(seed)
    for bi in range(g, nbr):
        cand = np.flatnonzero(~blocks[bi])
        k = min(r, len(cand))
        if k:
            blocks[bi, rng.choice(list(cand), size=k, replace=False)] = True
    return np.kron(blocks, np.ones((b, b), dtype=bool)).astype(bool)
