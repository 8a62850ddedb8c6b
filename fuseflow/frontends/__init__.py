"""Front ends: each turns a user's program into the compiler's :class:`~fuseflow.compiler.EinsumProgram`.

Front ends produce the Einsum IR and nothing else; fusion, tables and SAMML belong to the compiler.

- ``.ff`` text and the Python API: :mod:`fuseflow.compiler.frontend`
- PyTorch (``torch.fx``): :mod:`fuseflow.frontends.pytorch` (needs the ``torch`` extra)
"""
