# storlab: `make demo` and `make test` work on a fresh machine (they install what they need).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SYSSTAMP := .venv/.sysdeps
DEMO_DIR ?= demo-out

.PHONY: all venv sysdeps demo test bench clean

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall when the package metadata or the native engine changes.
$(STAMP): $(BIN)/python pyproject.toml $(wildcard engine/Cargo.toml engine/src/*.rs engine/pyproject.toml)
	$(BIN)/pip install -q -e ".[test,bench]"
	@if [ -f engine/pyproject.toml ]; then $(BIN)/pip install -q ./engine; fi
	touch $@

venv: $(STAMP)

# System programs the runners drive (Debian packages), installed only when missing.
sysdeps:
	@bash scripts/sysdeps.sh

demo: venv sysdeps
	bash scripts/demo.sh $(DEMO_DIR)

test: venv sysdeps
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

bench: venv sysdeps
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache build dist
