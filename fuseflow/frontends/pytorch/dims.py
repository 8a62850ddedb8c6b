"""Which index variables a traced model needs: dimension classes and their factorisation into atoms.

Every dimension (of size > 1) of every value that depends on the model's inputs belongs to a *class*:
dimensions that ops tie together (an element-wise op ties its operands' aligned dimensions to the
result's, a matrix product ties the contracted dimensions, ...) are one class and are read with the same
index variable. Dimensions of size 1 have no class: they are never stored (a broadcast needs no index).

A reshape does not tie classes; it *factorises* them. ``q.view(S, H, Dh)`` splits the class of ``q``'s
last dimension into two atoms (H, Dh); then every tensor with a dimension of that class, the projection
weight included, is stored with that dimension as two levels, and the reshape itself becomes a relabelling
of the same stored levels (no data movement, no kernel). This is how the head split and merge of
multi-head attention lower to an order-3 computation with a head index, and why a reshape is not a
fusion barrier here (FuseFlow's reshapes are; see docs/pytorch.md).
"""

from __future__ import annotations

from ...errors import ProgramError


class DimClasses:
    """Union-find over (node, dim) keys, each root carrying its atom sizes (outer to inner)."""

    def __init__(self):
        self.parent = {}
        self.atoms = {}

    def add(self, key, size):
        if key not in self.parent:
            self.parent[key] = key
            self.atoms[key] = [size]

    def find(self, key):
        root = key
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[key] != root:
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, a, b, where):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if _prod(self.atoms[ra]) != _prod(self.atoms[rb]):
            raise ProgramError(where, f"dimensions of sizes {_prod(self.atoms[ra])} and {_prod(self.atoms[rb])} "
                                      f"are combined")
        merged = common_refinement(self.atoms[ra], self.atoms[rb], where)
        self.parent[rb] = ra
        self.atoms[ra] = merged
        del self.atoms[rb]
        return True

    def atoms_of(self, key):
        return list(self.atoms[self.find(key)])

    def refine(self, key, atoms, where):
        r = self.find(key)
        new = common_refinement(self.atoms[r], atoms, where)
        if new != self.atoms[r]:
            self.atoms[r] = new
            return True
        return False


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _bounds(sizes):
    """Suffix products of a row-major shape: the strides at which its dimensions start, plus 1."""
    out, p = {1}, 1
    for s in reversed(sizes):
        p *= s
        out.add(p)
    return out


def common_refinement(a, b, where):
    """The coarsest atom list that refines both row-major factorisations ``a`` and ``b`` of one size."""
    bounds = sorted(_bounds(a) | _bounds(b), reverse=True)
    atoms = []
    for hi, lo in zip(bounds, bounds[1:]):
        if hi % lo:
            raise ProgramError(where, f"cannot reshape: the factorisations {tuple(a)} and {tuple(b)} of one "
                                      f"dimension do not nest")
        atoms.append(hi // lo)
    return atoms


def reshape_split(in_atoms, out_sizes, where):
    """Refine a reshape: ``in_atoms`` (per input dim, atoms) to output dims of ``out_sizes``.

    Returns (refined atoms per input dim, atoms per output dim); both flatten to the same atom list."""
    flat_in = [a for dim in in_atoms for a in dim]
    out_sizes = [s for s in out_sizes if s != 1]
    total = _prod(flat_in)
    if total != _prod(out_sizes):
        raise ProgramError(where, "reshape changes the number of elements")
    bounds = sorted(_bounds(flat_in) | _bounds(out_sizes), reverse=True)
    for hi, lo in zip(bounds, bounds[1:]):
        if hi % lo:
            raise ProgramError(where, f"cannot express the reshape {tuple(flat_in)} -> {tuple(out_sizes)} with "
                                      f"index variables (the dimensions do not nest)")

    def split(sizes):
        res, p = [], total
        for s in sizes:
            top, bottom = p, p // s
            res.append([hi // lo for hi, lo in zip(bounds, bounds[1:]) if hi <= top and lo >= bottom])
            p = bottom
        return res

    return split([_prod(d) for d in in_atoms]), split(out_sizes)
