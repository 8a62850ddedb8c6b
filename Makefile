# FuseFlow-HW: `make demo` runs the bundled example, `make test` the default test suite.
# Each target sets up its own virtual environment from pyproject.toml (PyPI only) when needed.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# default test run: 2 workers on CI's 2 cores
PYTEST_ARGS ?= -n 2

.PHONY: all venv demo test slow bench examples correlate synth-report clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m fuseflow.demo -o out/demo

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

slow: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS) -m slow

bench: $(STAMP)
	@mkdir -p benchmarks/results
	$(PY) benchmarks/sim_bench.py -o benchmarks/results/sim.json
	@for b in compile_bench rtl_bench; do \
	  if [ -f benchmarks/$$b.py ]; then $(PY) benchmarks/$$b.py || exit 1; fi; done

examples: $(STAMP)
	$(PY) -m fuseflow.samml kernels -o examples/kernels

clean:
	rm -rf out build sim_build .pytest_cache .hypothesis
