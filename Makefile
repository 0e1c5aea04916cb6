# The two front-door commands (run as root on Debian 12/13 x86_64):
#   make demo   set up, then run a private containerd with NRI and show QoS on sample pods
#   make test   set up, then ruff, mypy, unit tests and the end-to-end suite
# Set-up (scripts/setup.sh) is idempotent: a second run takes about a second.

VENV := .venv
PY := $(VENV)/bin/python
export PYTHONPATH := $(CURDIR)

.PHONY: setup demo test lint typecheck unit e2e kind clean

setup:
	@scripts/setup.sh

demo: setup
	@$(PY) scripts/demo.py

test: setup lint typecheck unit e2e

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck:
	$(VENV)/bin/mypy

unit:
	$(VENV)/bin/pytest -q tests/unit

# KOORD_E2E_REQUIRED=1: a skipped end-to-end test is a failure here.
e2e:
	KOORD_E2E_REQUIRED=1 $(VENV)/bin/pytest -q tests/e2e

# The control plane on a kind cluster (needs Docker, pytest-kind and helm; not part of `test`).
kind: setup
	$(VENV)/bin/pytest -q -rs tests/kind

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache
