"""Regenerate the committed protobuf modules of nri_plugin/api from their .proto files.

The generated modules are shipped in the package so that ``pip install`` needs no protoc.
tests/unit/nri_plugin/test_api_generated.py fails when they drift from the .proto files.

    .venv/bin/python scripts/genproto.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[1]
PROTOS = ["nri_plugin/api/nri.proto", "nri_plugin/api/ttrpc.proto"]


def well_known_include() -> Path:
    """grpc_tools' copy of google/protobuf/*.proto (for any.proto)."""
    return Path(protoc.__file__).parent / "_proto"


def main() -> int:
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{well_known_include()}",
        f"--python_out={ROOT}",
        f"--pyi_out={ROOT}",
        *PROTOS,
    ]
    if protoc.main(args) != 0:
        print("genproto: protoc failed", file=sys.stderr)
        return 1
    for proto in PROTOS:
        print(f"genproto: {proto} -> {proto.removesuffix('.proto')}_pb2.py(i)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
