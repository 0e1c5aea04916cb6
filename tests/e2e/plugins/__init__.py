"""NRI plugins the e2e suite runs as separate processes (external or launched by containerd)."""
