"""The end-to-end harness: a private containerd with NRI, a CRI client, cgroup reading.

Reused by the e2e fixtures (tests/e2e/conftest.py), the demo (scripts/demo.py) and the
benchmarks. Modules: ``paths`` (where set-up put things), ``images`` (OCI images from
busybox-static), ``crigen`` (CRI stubs from Debian's cri-api), ``containerd`` (the daemon),
``cri`` (the client), ``cgroups`` (reading and removing cgroups), ``node`` (all of it together).
"""
