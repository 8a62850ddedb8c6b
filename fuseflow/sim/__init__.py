"""The reference simulator: token-exact, cycle-level models of every SAMML op (float and fixed modes)."""

from .engine import SimResult, run, run_op

__all__ = ["run", "run_op", "SimResult"]
