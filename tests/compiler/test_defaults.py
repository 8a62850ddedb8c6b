"""fuseflow.compiler.defaults (what ``fuseflow compile --help`` shows without importing the compiler) equals the
compiler's own values."""

from fuseflow.compiler import defaults
from fuseflow.compiler.fusion import DEFAULT_MAX_ORDERS, SCHEDULES
from fuseflow.compiler.passes.depths import DEFAULT_BUDGET_BITS


def test_defaults_are_the_compilers():
    assert defaults.SCHEDULES == SCHEDULES
    assert defaults.DEFAULT_MAX_ORDERS == DEFAULT_MAX_ORDERS
    assert defaults.DEFAULT_BUDGET_BITS == DEFAULT_BUDGET_BITS
