# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each builds the virtual environment it needs from nothing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
# The CPU build of torch: an unpinned torch pulls gigabytes of CUDA packages.
TORCH  ?= torch==2.13.0

.PHONY: demo test test-all install install-dev perf clean

$(VENV)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) -U pip
	$(PIP) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.core
	$(PIP) $(TORCH)
	$(PIP) -e ".[dev,search,dense,train,e2b,ray]"
	# pyserini only for its Anserini (Lucene) jar; its declared deps are neural-encoder
	# stacks the BM25 path never imports (docs/search.md explains).
	$(PIP) --no-deps pyserini==1.6.0
	touch $@

install: $(VENV)/.core
install-dev: $(VENV)/.dev

demo: $(VENV)/.core
	$(VENV)/bin/tir-envs demo

test: $(VENV)/.dev
	$(PY) -m pytest -q

perf: $(VENV)/.dev
	for f in benchmarks/perf/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
