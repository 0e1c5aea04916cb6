"""Where the set-up script (scripts/setup.sh) leaves what the harness uses.

Everything lives under the repository's git-ignored ``.cache/`` folder: the containerd binaries
extracted from Debian's package, the generated CRI stubs and the OCI image tarballs.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("KOORD_CACHE_DIR", REPO_ROOT / ".cache"))
# The containerd versions set-up extracts (1.7 from Debian trixie, 2.1 from sid); the suite runs
# against KOORD_E2E_CONTAINERD (1.7 unless set).
CONTAINERD_ENV = "KOORD_E2E_CONTAINERD"
CONTAINERD_BIN_DIRS = {
    "1.7": CACHE / "containerd" / "usr" / "bin",
    "2.1": CACHE / "containerd-2.1" / "usr" / "bin",
}
CONTAINERD_VERSION = os.environ.get(CONTAINERD_ENV, "1.7")
if CONTAINERD_VERSION not in CONTAINERD_BIN_DIRS:
    known = " or ".join(CONTAINERD_BIN_DIRS)
    raise ValueError(f"{CONTAINERD_ENV}={CONTAINERD_VERSION!r}: not {known}")
CONTAINERD_BIN_DIR = CONTAINERD_BIN_DIRS[CONTAINERD_VERSION]
CRI_STUBS_DIR = CACHE / "cri"
IMAGES_DIR = CACHE / "images"
# Upstream Go sources from Debian (golang-github-containerd-{nri,ttrpc}-dev), read by the
# wire-compatibility tests.
UPSTREAM_SRC = CACHE / "upstream" / "usr" / "share" / "gocode" / "src" / "github.com" / "containerd"
UPSTREAM_NRI_PROTO = UPSTREAM_SRC / "nri" / "pkg" / "api" / "api.proto"
# NRI 0.8.0 (containerd 2.1's), from Debian sid's package of the same name.
UPSTREAM_NRI_08_PROTO = (
    CACHE / "upstream-0.8" / "usr/share/gocode/src/github.com/containerd/nri/pkg/api/api.proto"
)
UPSTREAM_TTRPC_DIR = UPSTREAM_SRC / "ttrpc"
RUNC = Path("/usr/sbin/runc")
PROMTOOL = CACHE / "prometheus" / "usr" / "bin" / "promtool"

SETUP_HINT = "run `make test` or scripts/setup.sh first"


class SetupMissing(RuntimeError):
    """Something the set-up script should have produced is not there."""


def require(path: Path, what: str) -> Path:
    """Return ``path`` if it exists, else raise SetupMissing naming ``what``."""
    if not path.exists():
        raise SetupMissing(f"{what} not found at {path}: {SETUP_HINT}")
    return path
