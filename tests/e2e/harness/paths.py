"""Where the set-up script (scripts/setup.sh) leaves what the harness uses.

Everything lives under the repository's git-ignored ``.cache/`` folder: the containerd binaries
extracted from Debian's package, the generated CRI stubs and the OCI image tarballs.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("KOORD_CACHE_DIR", REPO_ROOT / ".cache"))
CONTAINERD_BIN_DIR = CACHE / "containerd" / "usr" / "bin"
CRI_STUBS_DIR = CACHE / "cri"
IMAGES_DIR = CACHE / "images"
# Upstream Go sources from Debian (golang-github-containerd-{nri,ttrpc}-dev), read by the
# wire-compatibility tests.
UPSTREAM_SRC = CACHE / "upstream" / "usr" / "share" / "gocode" / "src" / "github.com" / "containerd"
UPSTREAM_NRI_PROTO = UPSTREAM_SRC / "nri" / "pkg" / "api" / "api.proto"
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
