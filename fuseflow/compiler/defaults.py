"""The compiler's command-line choices and defaults, without importing the compiler.

``fuseflow compile --help`` builds its parser from these alone (start-up, issue 42); the values are the ones of
:mod:`.fusion` (``SCHEDULES``, ``DEFAULT_MAX_ORDERS``) and :mod:`.passes.depths` (``DEFAULT_BUDGET_BITS``), and
``tests/compiler/test_defaults.py`` keeps them equal.
"""

#: fusion granularities (fuseflow.compiler.fusion.SCHEDULES)
SCHEDULES = ("none", "regions", "full")
#: cap of --list-orders (fuseflow.compiler.fusion.DEFAULT_MAX_ORDERS)
DEFAULT_MAX_ORDERS = 1000
#: FIFO bit budget of the depths pass (fuseflow.compiler.passes.depths.DEFAULT_BUDGET_BITS)
DEFAULT_BUDGET_BITS = 64 * 1024
#: how a tiled fuse region of two products runs (fuseflow.compiler.tilefuse.STRATEGIES)
TILE_FUSION = ("wavefront", "recompute", "materialise")
