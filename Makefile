# oasis-opt -- on a fresh machine with only Python >= 3.11:
#   make demo    create .venv, install, run a short end-to-end job (generate, solve, validate, summary)
#   make test    create .venv, install, run the test suite (what CI runs)
#   make docs    API reference from the docstrings into docs/api (pdoc, warnings are errors)
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

# the demo: one paper-sim instance; OASiS priced with U and L estimated on a past instance of the
# same workload (seed DEMO_HISTORY_SEED), then each policy of DEMO_POLICY (a space-separated list,
# default pricing) solved, validated and compared in one table
DEMO_POLICY ?= oasis drf
DEMO_PRESET ?= paper-sim
DEMO_JOBS ?= 100
DEMO_HORIZON ?= 300
DEMO_SEED ?= 1
DEMO_HISTORY_SEED ?= 1000
OUT ?= out
DEMO_INSTANCE := $(OUT)/demo-instance.json
DEMO_HISTORY := $(OUT)/demo-history.json
CLI := $(BIN)/oasis-opt

.PHONY: help install lock typecheck docs test demo bench chromium clean distclean

help:
	@echo "make demo   - install into $(VENV) if needed, then generate, estimate OASiS's pricing, solve (oasis + $(DEMO_POLICY)), validate, summarise, quick figures"
	@echo "make test   - install into $(VENV) if needed, then type-check and run pytest (PYTEST_ARGS='...' passes options)"
	@echo "make docs   - API reference (pdoc) into docs/api; any warning fails the build"
	@echo "make typecheck - mypy on the public modules (configured in pyproject.toml)"
	@echo "make lock   - re-resolve $(LOCK) from pyproject.toml's ranges (all extras, Python 3.11)"
	@echo "make bench  - run benchmarks/*.py"
	@echo "make chromium - install Chromium (apt-get, as root) for the dashboard's headless-browser test"
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

test: $(STAMP) typecheck
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(CLI) generate --preset $(DEMO_PRESET) --jobs $(DEMO_JOBS) --horizon $(DEMO_HORIZON) \
	  --seed $(DEMO_SEED) --out $(DEMO_INSTANCE)
	$(CLI) generate --preset $(DEMO_PRESET) --jobs $(DEMO_JOBS) --horizon $(DEMO_HORIZON) \
	  --seed $(DEMO_HISTORY_SEED) --out $(DEMO_HISTORY)
	$(CLI) estimate-pricing $(DEMO_HISTORY) --out $(OUT)/demo-pricing.json
	$(CLI) solve $(DEMO_INSTANCE) --policy oasis --pricing $(OUT)/demo-pricing.json --progress \
	  --out $(OUT)/demo-oasis-estimated.json
	$(CLI) validate $(DEMO_INSTANCE) $(OUT)/demo-oasis-estimated.json
	$(foreach p,$(DEMO_POLICY),$(CLI) solve $(DEMO_INSTANCE) --policy $(p) --progress \
	  --out $(OUT)/demo-$(p).json && $(CLI) validate $(DEMO_INSTANCE) $(OUT)/demo-$(p).json && ) true
	$(CLI) summary $(DEMO_INSTANCE) $(OUT)/demo-oasis-estimated.json \
	  $(foreach p,$(DEMO_POLICY),$(OUT)/demo-$(p).json)
	$(CLI) reproduce all --quick --results $(OUT)/results --out $(OUT)/paper_figs_quick

bench: $(STAMP)
	@set -e; for f in $(sort $(wildcard benchmarks/*.py)); do \
	  echo "== $$f"; $(BIN)/python $$f; done

# the dashboard's browser test (tests/test_service_dashboard.py) runs headless Chromium when it is
# on PATH and is skipped otherwise
chromium:
	command -v chromium >/dev/null || { apt-get update && apt-get install -y --no-install-recommends chromium; }
	chromium --version

clean:
	rm -rf $(OUT) build dist docs/api .pytest_cache .jax_cache .mypy_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .hypothesis src/*.egg-info
