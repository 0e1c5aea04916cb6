"""What koordlet knows about its node: pods (from NRI), the NodeSLO and node inputs (from a
file in standalone mode), the CPU topology and the kernel's features (from sysfs), and the
``runtimehooks.Rules`` snapshot built from all of them."""
