"""Putting koordlet on a node: containerd's NRI settings, systemd units, the NRI plugin."""
