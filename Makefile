# oasis-opt -- on a fresh machine with only Python >= 3.11:
#   make demo    create .venv, install, run a short end-to-end job (generate, solve, validate, summary)
#   make test    create .venv, install, run the test suite (what CI runs)
# The venv is a file target: it is (re)installed only when missing or when pyproject.toml changes.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= dev,dist,notebooks,automl
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

.PHONY: help install test demo bench clean distclean

help:
	@echo "make demo   - install into $(VENV) if needed, then generate, estimate OASiS's pricing, solve (oasis + $(DEMO_POLICY)), validate, summarise, quick figures"
	@echo "make test   - install into $(VENV) if needed, then run pytest (PYTEST_ARGS='...' passes options)"
	@echo "make bench  - run benchmarks/*.py"
	@echo "make clean  - remove generated outputs and caches (distclean also removes $(VENV))"

# uv installs in about half pip's time; --compile-bytecode matters because this environment may
# set PYTHONDONTWRITEBYTECODE=1, and without compiled bytecode every later import compiles from
# source (the test suite runs twice as slow).
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "oasis-opt needs Python >= 3.11; run e.g. 'make PYTHON=python3.11 ...'" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -e '.[$(EXTRAS)]'
	@touch $@

install: $(STAMP)

test: $(STAMP)
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

clean:
	rm -rf $(OUT) build dist .pytest_cache .jax_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .hypothesis src/*.egg-info
