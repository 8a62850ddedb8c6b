"""The benchmark scripts stay runnable: ``make bench`` (benchmarks/run_all.py) names only scripts that exist,
and every script imports against the current package (a renamed or removed function fails here, not an hour
into a benchmark run). What the benchmarks measure is checked by their own targets, not here."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
SCRIPTS = sorted(f[:-3] for f in os.listdir(BENCH) if f.endswith(".py"))


def load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_imports(name):
    module = load(name)
    assert callable(getattr(module, "main", None)), f"benchmarks/{name}.py has no main()"


def test_make_bench_runs_every_results_benchmark():
    run_all = load("run_all")
    names = [b[0] for b in run_all.BENCHMARKS]
    assert len(set(names)) == len(names)
    assert set(names) <= set(SCRIPTS)
    # the scripts left out of make bench are the ones with their own targets or a before/after protocol
    assert set(SCRIPTS) - set(names) - {"run_all"} == {"synth_bench", "widths_bench"}


def test_run_all_rejects_an_unknown_benchmark(capsys):
    assert load("run_all").main(["--only", "no_such_bench"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: benchmark no_such_bench: not one of ") and "\n" not in err


def test_pytorch_doc_quotes_models_json():
    """docs/pytorch.md's measured-models table is models_bench's rendering of the committed models.json."""
    import json
    bench = load("models_bench")
    with open(os.path.join(BENCH, "results", "models.json")) as f:
        table = bench.markdown(json.load(f))
    with open(os.path.join(ROOT, "docs", "pytorch.md")) as f:
        doc = f.read()
    assert table in doc, "regenerate it: python benchmarks/models_bench.py --markdown"
