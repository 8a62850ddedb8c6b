"""The PyTorch front end: trace an ``nn.Module`` with ``torch.fx`` and lower it to an EinsumProgram.

    from fuseflow.frontends.pytorch import lower
    low = lower(model, example_inputs)          # Lowered: .program (EinsumProgram), input/output bindings
    low.program                                 # compile with fuseflow.compiler.compile_program

Most users want :func:`fuseflow.compile` (the model object). Needs the ``torch`` extra; docs/pytorch.md.
"""

from .lower import Binding, Lowered, coordinate_mask, lower, region_key

__all__ = ["lower", "Lowered", "Binding", "region_key", "coordinate_mask"]
