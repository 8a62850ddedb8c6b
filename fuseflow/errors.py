"""One exception hierarchy for the whole package.

Command-line tools catch :class:`FuseFlowError` and print ``error: <what>: <why>`` on one line,
exiting with status 2 (see :func:`fuseflow.cli.main_guard`).
"""


class FuseFlowError(Exception):
    """Base of every error caused by bad input; ``what`` names the thing, ``why`` the reason."""

    def __init__(self, what, why=None):
        if why is None:
            what, why = type(self).default_what, what
        self.what = str(what)
        self.why = str(why)
        super().__init__(f"{self.what}: {self.why}")

    default_what = "input"


class GraphError(FuseFlowError):
    """A graph.json file or in-memory graph that is malformed or invalid."""
    default_what = "graph"


class UnknownOpError(GraphError):
    """An op name that the registry does not know."""
    default_what = "op"


class TensorError(FuseFlowError):
    """Tensor data that does not match its declared shape, format or widths."""
    default_what = "tensor"


class StreamError(FuseFlowError):
    """A token stream that breaks an op's token rules (malformed fibres, mismatched stops)."""
    default_what = "stream"


class DeadlockError(FuseFlowError):
    """A simulated graph in which no op can make progress; names the stuck streams."""
    default_what = "deadlock"


class ProgramError(FuseFlowError):
    """A bad source program: syntax, undeclared tensors, shape or index mismatches, unsatisfiable orders."""
    default_what = "program"


class HardwareError(FuseFlowError):
    """Data or graphs that do not fit a hardware build (capacities, widths)."""
    default_what = "hardware"


class DatasetError(FuseFlowError):
    """A graph dataset file that is missing or malformed (``fuseflow.datasets``); ``what`` names the file."""
    default_what = "dataset"
