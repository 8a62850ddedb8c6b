# FuseFlow-HW: `make demo` runs the bundled example (a PyTorch GCN to Verilator), `make test` the default test suite.
# Each target sets up its own virtual environment from pyproject.toml (PyPI only) when needed.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# default test run: 2 workers on CI's 2 cores
PYTEST_ARGS ?= -n 2

.PHONY: all venv demo test slow bench examples docs correlate correlate-quick synth-report boards dse paper clean

all: test

# the compiled simulator engine is built by pip (setup.py): reinstall when its sources change
ENGINE_SOURCES := setup.py $(wildcard fuseflow/sim/csrc/*.cpp fuseflow/sim/csrc/*.hpp fuseflow/sim/csrc/ops/*.cpp)

$(STAMP): pyproject.toml $(ENGINE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,torch]'
	@$(PY) -c "import fuseflow.sim.compiled as c; c.available() or print('warning: the compiled simulator engine was not built (no C++20 compiler?): simulations run on the Python engine')"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m fuseflow.demo -o out/demo

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

slow: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS) -m slow

# every benchmark once (about an hour on 2 cores): benchmarks/results/*.json and bench_run.json (the run's record)
bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# RTL-vs-simulator correlation report (Verilator): report/correlation.{md,json,png}
correlate: $(STAMP)
	$(PY) -m fuseflow.hw correlate --suite default -o report --scheduler local

correlate-quick: $(STAMP)
	$(PY) -m fuseflow.hw correlate --suite quick -o report

# design-space experiments mirroring the paper's Section 8 (report/dse/index.html, JSON and PNGs; ~10 min on 2 cores)
dse: $(STAMP)
	$(PY) -m fuseflow.dse run all -o report/dse --scheduler local:2

# the paper's Figure 12 at the paper's sizes: GCN and GraphSAGE on Cora, the autoencoder at 224 x 224, GPT-3 Small
# BigBird attention at sequence 1024, each unfused / partially / fully fused and checked against PyTorch
# (report/paper/index.html; the committed run is benchmarks/results/dse/fig12.json); then every model's paper-size
# rows of benchmarks/results/models.json (models_bench, each case under a 2400 s limit; the decoder block at the
# paper's size takes hours and is left out: models_bench.py --sizes paper --models decoder runs it)
paper: $(STAMP)
	$(PY) -m fuseflow.dse run fig12 --size paper -o report/paper
	$(PY) benchmarks/models_bench.py --sizes paper --models gcn graphsage autoencoder attention

# every op alone and the quick-suite kernels on ECP5-85F: benchmarks/results/synth.{json,md}
synth-report: $(STAMP)
	$(PY) benchmarks/synth_bench.py -o benchmarks/results/synth.json --md benchmarks/results/synth.md

# bitstreams for both boards (SpMV behind a UART host bridge): build/<board>/
# ULX3S: SpMV (DCSR) with its kernel clock from the ECP5 PLL at 100 MHz, below the Fmax the build reaches when
# placed for it (docs/boards.md).
# iCEBreaker: vector_add, because the SpMV board top (pipelined 32-bit multiply, memories as flip-flops on
# the iCE40) needs about 7240 of the UP5K's 5280 logic cells and is refused by the resource check before
# place and route (docs/boards.md).
boards: $(STAMP)
	$(PY) -m fuseflow.boards build examples/kernels/spmv_dcsr/graph.json --board ulx3s-85f \
	    --random-inputs 0.5 --clock 100 -o build/ulx3s-85f
	$(PY) -m fuseflow.boards build examples/kernels/vector_add/graph.json --board icebreaker \
	    --random-inputs 0.5 -o build/icebreaker

examples: $(STAMP)
	$(PY) -m fuseflow.samml kernels -o examples/kernels

# the generated op reference (tests/samml/test_reference.py checks it is current)
docs: $(STAMP)
	$(PY) -m fuseflow.samml reference -o docs/reference/ops.md

clean:
	rm -rf out build sim_build report .pytest_cache .hypothesis .mypy_cache
