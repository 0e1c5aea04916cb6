"""Interference inspection with eBPF: how long each pod's runnable threads wait for a CPU.

``program`` loads the bcc program (or says exactly what is missing), ``histogram`` holds the
log2-histogram arithmetic, ``schedlat`` turns the kernel's per-cgroup histograms into per-pod
and per-class figures for the metric cache, Prometheus and ``koordctl inspect``.
"""
