# oasis-opt -- on a fresh machine with only Python >= 3.11:
#   make demo    create .venv, install, run a short end-to-end job (generate, solve, validate, summary)
#   make case-study  create .venv, install, run the computer-vision case study (service, AutoML
#                search, training jobs, exported model, held-out accuracy) into out/case-study
#   make test    create .venv, install, run the test suite (what CI runs)
#   make docs    API reference from the docstrings into docs/api (pdoc, warnings are errors)
#   make stress-test   the suite three times in a row while STRESS_PROCS busy processes load the CPUs
# The venv is a file target: it is (re)installed only when missing or when pyproject.toml or the
# lock (requirements/lock.txt, the exact tested versions) changes.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= all
LOCK := requirements/lock.txt
PYTEST_ARGS ?=
# pytest-xdist workers of `make test` (2 = both cores of a 2-core CI machine; 0 runs the suite in
# one process); each worker takes whole units (tests/conftest.py's scheduler: a file, or every
# test that starts Ray)
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS)
# busy-loop processes that keep the CPUs loaded during `make stress-test` (2 = both cores of a
# 2-core CI machine), and how many times the suite runs under that load
STRESS_PROCS ?= 2
STRESS_RUNS ?= 3

# the demo: one paper-sim instance; OASiS priced with U and L estimated (estimate-pricing's
# default rule, the searched floor) on past instances of the same workload (seeds
# DEMO_HISTORY_SEEDS, the figures' history), then each policy of DEMO_POLICY (a space-separated
# list, default pricing) solved, validated and compared in one table
DEMO_POLICY ?= oasis drf
DEMO_PRESET ?= paper-sim
DEMO_JOBS ?= 100
DEMO_HORIZON ?= 300
DEMO_SEED ?= 1
DEMO_HISTORY_SEEDS ?= 1000 1001 1002
OUT ?= out
DEMO_INSTANCE := $(OUT)/demo-instance.json
DEMO_HISTORY := $(foreach s,$(DEMO_HISTORY_SEEDS),$(OUT)/demo-history-$(s).json)
CLI := $(BIN)/oasis-opt
# the case study: options of `oasis-opt case-study` (e.g. CASE_STUDY_ARGS='--trials 16
# --concurrent 3 --screenshot docs/case-study-dashboard.png')
CASE_STUDY_ARGS ?=

.PHONY: help install lock typecheck docs test stress-test demo case-study dashboard-screenshot bench chromium clean distclean

help:
	@echo "make demo   - install into $(VENV) if needed, then generate, estimate OASiS's pricing, solve (oasis + $(DEMO_POLICY)), validate, summarise, quick figures"
	@echo "make case-study - install into $(VENV) if needed, then run the computer-vision case study into $(OUT)/case-study (CASE_STUDY_ARGS='...' passes options)"
	@echo "make test   - install into $(VENV) if needed, then type-check and run pytest (PYTEST_ARGS='...' passes options)"
	@echo "make stress-test - the suite $(STRESS_RUNS) times in a row with $(STRESS_PROCS) busy processes (fails if any run fails)"
	@echo "make docs   - API reference (pdoc) into docs/api; any warning fails the build"
	@echo "make typecheck - mypy on the public modules (configured in pyproject.toml)"
	@echo "make lock   - re-resolve $(LOCK) from pyproject.toml's ranges (all extras, Python 3.11)"
	@echo "make bench  - run benchmarks/*.py"
	@echo "make dashboard-screenshot - docs/service-dashboard.png, taken by the browser test (needs Chromium)"
	@echo "make chromium - install Chromium (apt-get, as root) for the dashboard's headless-browser test (make test does; BROWSER=0 skips it)"
	@echo "make clean  - remove generated outputs and caches (distclean also removes $(VENV))"

# uv installs in about half pip's time; --compile-bytecode matters because this environment may
# set PYTHONDONTWRITEBYTECODE=1, and without compiled bytecode every later import compiles from
# source (the test suite runs twice as slow).
# The lock is used as constraints: exactly its versions for what EXTRAS pulls in, nothing more.
$(BIN)/uv:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "oasis-opt needs Python >= 3.11; run e.g. 'make PYTHON=python3.11 ...'" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'uv>=0.5,<1'

$(STAMP): pyproject.toml $(LOCK) | $(BIN)/uv
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode \
	  --constraints $(LOCK) -e '.[$(EXTRAS)]'
	@touch $@

install: $(STAMP)

lock: | $(BIN)/uv
	$(BIN)/uv pip compile pyproject.toml --extra all --python-version 3.11 \
	  --custom-compile-command 'make lock' --quiet -o $(LOCK)

typecheck: $(STAMP)
	$(BIN)/python -m mypy

docs: $(STAMP)
	JAX_PLATFORMS=cpu $(BIN)/python docs/build.py docs/api

# BROWSER=1 (the default): make test installs Chromium (the chromium target) and the dashboard's
# browser test must run (OASIS_OPT_REQUIRE_BROWSER=1 makes a missing Chromium a failure, not a
# skip); BROWSER=0 installs nothing and skips that one test.
BROWSER ?= 1
BROWSER_DEP := $(if $(filter 1,$(BROWSER)),chromium,)
test: $(STAMP) typecheck $(BROWSER_DEP)
	OASIS_OPT_REQUIRE_BROWSER=$(BROWSER) $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# No test may depend on the machine's speed: the suite must pass with every core busy. The busy
# processes are started here and killed (by their ids) when the recipe ends, pass or fail.
stress-test: $(STAMP) $(BROWSER_DEP)
	@pids=""; trap 'kill $$pids 2>/dev/null; wait $$pids 2>/dev/null' EXIT; \
	for n in $$(seq $(STRESS_PROCS)); do \
	  $(BIN)/python -c 'while True: pass' & pids="$$pids $$!"; done; \
	echo "stress-test: $(STRESS_PROCS) busy processes (pids$$pids)"; \
	for run in $$(seq $(STRESS_RUNS)); do \
	  start=$$(date +%s); \
	  OASIS_OPT_REQUIRE_BROWSER=$(BROWSER) $(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS) \
	    || { echo "stress-test: run $$run of $(STRESS_RUNS) FAILED"; exit 1; }; \
	  echo "stress-test: run $$run of $(STRESS_RUNS) passed in $$(( $$(date +%s) - start )) s"; \
	done

demo: $(STAMP)
	$(CLI) generate --preset $(DEMO_PRESET) --jobs $(DEMO_JOBS) --horizon $(DEMO_HORIZON) \
	  --seed $(DEMO_SEED) --out $(DEMO_INSTANCE)
	$(foreach s,$(DEMO_HISTORY_SEEDS),$(CLI) generate --preset $(DEMO_PRESET) --jobs $(DEMO_JOBS) \
	  --horizon $(DEMO_HORIZON) --seed $(s) --out $(OUT)/demo-history-$(s).json && ) true
	$(CLI) estimate-pricing $(DEMO_HISTORY) --out $(OUT)/demo-pricing.json
	$(CLI) solve $(DEMO_INSTANCE) --policy oasis --pricing $(OUT)/demo-pricing.json --progress \
	  --out $(OUT)/demo-oasis-estimated.json
	$(CLI) validate $(DEMO_INSTANCE) $(OUT)/demo-oasis-estimated.json
	$(foreach p,$(DEMO_POLICY),$(CLI) solve $(DEMO_INSTANCE) --policy $(p) --progress \
	  --out $(OUT)/demo-$(p).json && $(CLI) validate $(DEMO_INSTANCE) $(OUT)/demo-$(p).json && ) true
	$(CLI) summary $(DEMO_INSTANCE) $(OUT)/demo-oasis-estimated.json \
	  $(foreach p,$(DEMO_POLICY),$(OUT)/demo-$(p).json)
	$(CLI) reproduce all --quick --results $(OUT)/results --out $(OUT)/paper_figs_quick

# the README's picture of the service's dashboard, as the browser test sees it
dashboard-screenshot: $(STAMP) chromium
	OASIS_OPT_REQUIRE_BROWSER=1 OASIS_OPT_DASHBOARD_PNG=$(CURDIR)/docs/service-dashboard.png \
	  $(BIN)/python -m pytest -q -p xdist -n 1 tests/test_service_live.py -k dashboard_shows

case-study: $(STAMP)
	$(CLI) case-study --out $(OUT)/case-study $(CASE_STUDY_ARGS)

bench: $(STAMP)
	@set -e; for f in $(sort $(wildcard benchmarks/*.py)); do \
	  echo "== $$f"; $(BIN)/python $$f; done

# Debian's Chromium for the dashboard's browser test (tests/test_service_live.py, headless):
# installed with apt-get as root (or through sudo); anyone else installs it by hand or runs
# make test BROWSER=0.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "make chromium: Chromium is not installed and apt-get needs root: install the" \
	    "chromium package, or run make test BROWSER=0 (skips the browser test)" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends chromium >/dev/null; }
	@chromium --version 2>/dev/null

clean:
	rm -rf $(OUT) build dist docs/api .pytest_cache .jax_cache .mypy_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .hypothesis src/*.egg-info
