"""docs/evaluation.md quotes the committed results JSON through a generated block, never retyped numbers."""

import os

from fuseflow.dse.report import evaluation_markdown

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RES = os.path.join(ROOT, "benchmarks", "results")


def test_results_block_matches_the_json():
    block = evaluation_markdown(os.path.join(RES, "dse"), os.path.join(RES, "cost.json"),
                                os.path.join(RES, "autoschedule.json"))
    doc = open(os.path.join(ROOT, "docs", "evaluation.md")).read()
    assert block in doc, "regenerate the block: python -m fuseflow.dse evaluation"
    for name in ("fusion", "flops", "sparsity", "orders"):
        assert f"(`{name}`" in block
