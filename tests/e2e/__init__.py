"""End-to-end tests against a real containerd with NRI enabled, real runc and real cgroups."""
