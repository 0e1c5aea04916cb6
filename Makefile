# The two front-door commands (run as root on Debian 12/13 x86_64):
#   make demo   set up, then run a private containerd with NRI and show QoS on sample pods
#   make test   set up, then ruff, mypy, unit tests and the end-to-end suite
#   make cluster        a real single-node Kubernetes with the chart and a co-located workload
#   make cluster-down   remove it
# Set-up (scripts/setup.sh) is idempotent: a second run takes about a second.

VENV := .venv
PY := $(VENV)/bin/python
export PYTHONPATH := $(CURDIR)

.PHONY: setup demo demo-v2 test lint typecheck unit e2e e2e-host e2e-v2 e2e-cluster kube \
	cluster cluster-down clean

setup:
	@scripts/setup.sh

demo: setup
	@$(PY) scripts/demo.py

# The demo on cgroup v2: the same, in the VM of the v2 tier (systemd as PID 1).
demo-v2: setup
	@$(PY) -m tests.e2e.harness.vm -- $(PY) scripts/demo.py

test: setup lint typecheck unit e2e

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck:
	$(VENV)/bin/mypy

unit:
	$(VENV)/bin/pytest -q tests/unit

# The end-to-end tiers (tests/e2e/tiers.py). KOORD_E2E_REQUIRED=1: a skipped end-to-end test,
# or a VM that cannot boot here, is a failure.
e2e: e2e-host e2e-v2 e2e-cluster

# This machine: cgroup v1, containerd 1.7 (all tests) and 2.1 (what depends on its version).
e2e-host:
	KOORD_E2E_REQUIRED=1 $(PY) -m tests.e2e.tiers host host-containerd2

# A cgroup v2 VM with systemd as PID 1: containerd 2.1 and 1.7, the cgroupfs and systemd drivers.
e2e-v2:
	KOORD_E2E_REQUIRED=1 $(PY) -m tests.e2e.tiers --vm v2 v2-containerd17 v2-systemd

# A real single-node Kubernetes (tests/cluster/): the chart installed by Helm and the co-location
# chain, on containerd 1.7 and 2.1. Builds the Kubernetes binary first when missing.
e2e-cluster: kube
	KOORD_E2E_REQUIRED=1 $(PY) -m tests.e2e.tiers cluster cluster-containerd2

# Kubernetes v1.37.2 and CoreDNS from their Go modules (kubebin/), cached outside the clone.
kube:
	@$(PY) -m tests.cluster.kubebuild >/dev/null

# The cluster for a user: up, the chart installed, a co-located workload, what happened; it
# stays up (a kubeconfig and a kubectl wrapper under .cache/cluster/) until cluster-down.
cluster: setup kube
	@$(PY) scripts/cluster.py up

cluster-down:
	@$(PY) scripts/cluster.py down

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache
