"""koordlet's rule that import-linter cannot express: only ``koordlet.executor`` writes kernel
state. Every other module computes; a file write outside the executor bypasses its validation,
its skipping of unchanged values and its write counters.

The check reads the source: a call that writes a file (``write_text``, ``write_bytes``,
``os.write``, ``open`` with a writing mode) outside the executor must be in ALLOWED, with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import koordlet

PACKAGE = Path(koordlet.__file__).parent
# module (relative to koordlet/) → why it writes files that are not kernel state
ALLOWED = {
    "install/transaction.py": "koordlet install writes containerd's and systemd's config files",
    "daemon.py": "the NodeMetric status file (--node-metric-file), replaced atomically",
}
WRITING_METHODS = {"write_text", "write_bytes"}


def writes_files(tree: ast.AST) -> list[int]:
    """Lines of calls that write a file."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in WRITING_METHODS:
            lines.append(node.lineno)
        elif isinstance(func, ast.Attribute) and func.attr == "write":
            if isinstance(func.value, ast.Name) and func.value.id == "os":
                lines.append(node.lineno)
        elif isinstance(func, ast.Name | ast.Attribute) and (
            (func.id if isinstance(func, ast.Name) else func.attr) == "open"
        ):
            modes = [a for a in node.args[1:2] if isinstance(a, ast.Constant)]
            modes += [k.value for k in node.keywords if k.arg == "mode"]  # type: ignore[misc]
            if any(isinstance(m, ast.Constant) and set(str(m.value)) & set("wax+") for m in modes):
                lines.append(node.lineno)
    return lines


def test_the_check_finds_each_kind_of_write() -> None:
    source = (
        "p.write_text('1')\nos.write(fd, b'1')\nopen(p, 'w')\nopen(p, mode='a')\n"
        "open(p)\npath.read_text()\nq.write_bytes(b'')\n"
    )
    assert writes_files(ast.parse(source)) == [1, 2, 3, 4, 7]


def test_only_the_executor_writes_kernel_state() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("executor/") or rel in ALLOWED:
            continue
        lines = writes_files(ast.parse(path.read_text(), str(path)))
        if lines:
            found[rel] = lines
    assert found == {}
    for rel in ALLOWED:  # an allowance that no longer writes is stale
        assert writes_files(ast.parse((PACKAGE / rel).read_text())), rel
