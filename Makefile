# The README's two commands: `make demo` (set up, run the main job) and `make test` (set up, run the tests).
# `make test-fast` skips the tests marked slow or root; `make docs` regenerates docs/configuration.md.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
DEMO_OUT ?= demo-out

.PHONY: setup system-deps lint test test-fast docs demo bench clean

setup: $(VENV)/.installed

# torch first, pinned to the local CPU wheel, so resolving the project never pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,ray]'  # ray: the fan-out test runs a real local cluster
	$(BIN)/pip check
	touch $@

system-deps:
	bash scripts/system-deps.sh

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: setup system-deps lint
	$(BIN)/pytest --durations=40  # the slowest tests, so one that outgrows CI is seen early

# The inner loop while editing: no lint, no system packages, no tests marked slow (real Prometheus, demo
# end to end, Ray) or root (XDP in the kernel).
test-fast: setup
	$(BIN)/pytest -m "not slow and not root"

docs: setup
	$(BIN)/python -m predictor.config_reference docs/configuration.md

demo: setup
	$(BIN)/predictor demo --out $(DEMO_OUT)

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache .mypy_cache .ruff_cache
