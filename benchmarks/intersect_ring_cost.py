"""What the ring-neighbour pop rule of the intersect of arity >= 4 costs in cycles (docs/hardware.md, "intersect
look-ahead"): ``wide_lookahead_cost`` at base d2f0d2c (the last with "pop every input below the largest head")
against this tree, over every suite entry with an intersect of arity >= 4. Writes
benchmarks/results/intersect_ring.json."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import wide_lookahead_cost  # noqa: E402


def main(argv=None):
    return wide_lookahead_cost.main(["--base", "d2f0d2c", "--head", ".", "--min-arity", "4",
                                     "-o", os.path.join(HERE, "results", "intersect_ring.json"), *(argv or [])])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
