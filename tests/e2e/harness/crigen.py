"""Generate the CRI (runtime.v1) Python client from Debian's cri-api package at set-up time.

The upstream api.proto imports gogoproto and sets Go-only file options; protoc for Python does
not need them, so they are stripped before compiling. The proto is copied into
``OUT/proto/cri_v1/`` so the generated modules import each other as ``cri_v1.api_pb2``; nothing
here is committed to the repository.

Run as ``python -m tests.e2e.harness.crigen PATH/TO/api.proto OUT_DIR`` (the set-up script does).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from grpc_tools import protoc  # a dev dependency: set-up time only

PACKAGE = "cri_v1"

_GOGO_IMPORT = re.compile(r'^\s*import\s+"github\.com/gogo/protobuf/gogoproto/gogo\.proto";\s*$')
_GOGO_OPTION = re.compile(r"^\s*option\s+\(gogoproto\.[A-Za-z_]+\)\s*=\s*[^;]*;\s*$")
_GOGO_FIELD_OPTION = re.compile(r"\s*\[\s*\(gogoproto\.[^\]]*\]")


def strip_gogo(proto: str) -> str:
    """Remove the gogoproto import, file options and field options from a .proto text."""
    lines = []
    for line in proto.splitlines():
        if _GOGO_IMPORT.match(line) or _GOGO_OPTION.match(line):
            continue
        lines.append(_GOGO_FIELD_OPTION.sub("", line))
    return "\n".join(lines) + "\n"


def generate(proto_path: Path, out_dir: Path) -> Path:
    """Compile ``proto_path`` into ``out_dir/gen/cri_v1``; return the folder for sys.path."""
    src_dir = out_dir / "proto" / PACKAGE
    gen_dir = out_dir / "gen"
    src_dir.mkdir(parents=True, exist_ok=True)
    (gen_dir / PACKAGE).mkdir(parents=True, exist_ok=True)
    (src_dir / "api.proto").write_text(strip_gogo(proto_path.read_text()))
    (gen_dir / PACKAGE / "__init__.py").write_text('"""Generated CRI v1 client stubs."""\n')
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf well-known types
    args = [
        "protoc",
        f"-I{out_dir / 'proto'}",
        f"-I{include}",
        f"--python_out={gen_dir}",
        f"--grpc_python_out={gen_dir}",
        f"{PACKAGE}/api.proto",
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {proto_path}")
    return gen_dir


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.e2e.harness.crigen API_PROTO OUT_DIR", file=sys.stderr)
        return 2
    proto = Path(argv[0])
    if not proto.exists():
        print(
            f"crigen: {proto} is missing (Debian package golang-github-kubernetes-cri-api-dev)",
            file=sys.stderr,
        )
        return 1
    print(f"crigen: CRI stubs in {generate(proto, Path(argv[1]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
