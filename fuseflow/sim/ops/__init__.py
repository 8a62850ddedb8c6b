"""One behavioural model per registry op (``fuseflow/sim/ops/<op>.py``), each a generator ``run(st, ins, outs)``.

A model fires at most once per cycle and pops/pushes at most one token per port per firing; ``st.clock`` is the
cycle of its last firing. It yields the channel or output it waits for whenever the information it needs
(a token, or a free slot) has not been simulated yet. See docs/samml.md for each op's rules.
"""

import importlib

from ...samml.registry import OPS

MODELS = {name: importlib.import_module(f"{__name__}.{name}").run for name in OPS}
