"""benchmarks/synth_bench.py's table header names the nextpnr seed(s) its rows were placed with."""

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))

import synth_bench  # noqa: E402


def _doc(seeds):
    with open(os.path.join(HERE, "..", "benchmarks", "results", "synth.json")) as f:
        doc = json.load(f)
    rows = [dict(r) for r in doc["results"][:len(seeds)]]
    for r, s in zip(rows, seeds):
        if s is None:
            r.pop("seed", None)
        else:
            r["seed"] = s
    doc["results"] = rows
    return doc


@pytest.mark.parametrize("seeds, says", [((None, None), "nextpnr seed 1,"), ((2, 2), "nextpnr seed 2,"),
                                         ((1, 3), "nextpnr seeds 1, 3 (per row in the JSON),")])
def test_header_names_the_seeds(seeds, says):
    assert says in synth_bench.markdown(_doc(seeds))

