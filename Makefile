# storlab: `make demo` and `make test` work on a fresh machine (they install what they need).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SYSSTAMP := .venv/.sysdeps
DEMO_DIR ?= demo-out

.PHONY: all venv lock sysdeps demo test bench stress clean

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The two Rust crates (pyo3 modules): the simulator's engine and the design search.
CRATES := engine designs
CRATE_SRC := $(foreach c,$(CRATES),$(wildcard $(c)/Cargo.toml $(c)/Cargo.lock $(c)/pyproject.toml $(c)/src/*.rs))

# Reinstall when the lock, the package metadata or a native crate changes.
# The exact versions (with hashes) come from requirements.lock; storlab and its crates are
# then installed without resolving anything again, and `pip check` fails when pyproject
# declares a dependency the lock lacks (refresh it with `make lock`).
$(STAMP): $(BIN)/python pyproject.toml requirements.lock $(CRATE_SRC)
	$(BIN)/pip install -q --require-hashes -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	@for c in $(CRATES); do if [ -f $$c/pyproject.toml ]; then \
	  $(BIN)/pip install -q --no-deps ./$$c || exit 1; fi; done
	$(BIN)/pip check
	touch $@

venv: $(STAMP)

# Re-resolve the newest versions pyproject.toml allows and write them to requirements.lock
# (uv runs from its own throwaway venv, so the project's venv is not touched).
UV := .venv-uv/bin/uv
$(UV):
	$(PY) -m venv .venv-uv
	.venv-uv/bin/pip install -q uv

lock: $(UV)
	$(UV) pip compile pyproject.toml --extra test --extra bench --universal --generate-hashes \
	  -q -o requirements.lock

# System programs the runners drive (Debian packages), installed only when missing.
sysdeps:
	@bash scripts/sysdeps.sh

# The demo needs fio, losetup and bubblewrap only (scripts/sysdeps.d/fio.txt), not the clusters' packages.
demo: venv
	@bash scripts/sysdeps.sh fio
	bash scripts/demo.sh $(DEMO_DIR)

# Three workers on two cores: the tests wait on real programs (fio's runtime, Ceph's
# health, a browser), so two workers kept 1.2 cores busy; on a quiet 2-core machine the
# suite took 648 s with two workers and 544 s with three (docs/architecture.md).
test: venv sysdeps
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup

bench: venv sysdeps
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# 20 up/restart/down cycles of each cluster under CPU load (root; ~40 min; not in `make test`)
CYCLES ?= 20
stress: venv sysdeps
	$(BIN)/python scripts/stress_clusters.py --cycles $(CYCLES)

clean:
	rm -rf $(VENV) .venv-uv $(DEMO_DIR) .pytest_cache build dist
