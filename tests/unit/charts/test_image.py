"""The Containerfile builds the image the chart runs, checked as text here; scripts/setup.sh
builds it and tests/e2e/test_daemonset.py runs it as the chart's DaemonSet."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import PurePosixPath
from typing import Any

import yaml

from koordlet.cli import build_parser
from tests.unit.charts import helm

CONTAINERFILE = (helm.ROOT / "Containerfile").read_text()
IGNORED = [
    line.strip().rstrip("/")
    for line in (helm.ROOT / ".dockerignore").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
PYPROJECT: dict[str, Any] = tomllib.loads((helm.ROOT / "pyproject.toml").read_text())


def instructions(name: str) -> list[str]:
    """The arguments of every ``name`` instruction, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", CONTAINERFILE)
    return [m.group(1).strip() for m in re.finditer(rf"^{name}\s+(.*)$", text, re.MULTILINE)]


def copied() -> set[str]:
    found = set()
    for args in instructions("COPY"):
        *sources, _ = args.split()
        found |= {s.rstrip("/") for s in sources}
    return found


def ignored(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return any(
        fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(parts[0], pattern) for pattern in IGNORED
    )


def test_image_is_python_311_slim_bookworm_with_koordlet_as_entrypoint() -> None:
    # the base is a build argument: the public image by default, set-up passes a local one
    assert instructions("FROM") == ["${BASE_IMAGE}"]
    assert instructions("ARG")[0] == "BASE_IMAGE=python:3.11-slim-bookworm"
    assert CONTAINERFILE.index("ARG BASE_IMAGE") < CONTAINERFILE.index("FROM ")
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    assert instructions("ENTRYPOINT") == ['["koordlet"]']
    assert "koordlet" in PYPROJECT["project"]["scripts"]


def test_image_installs_every_package_of_the_distribution() -> None:
    packages = {
        p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    needed = packages | {"pyproject.toml", PYPROJECT["project"]["readme"], "LICENSE"}
    assert needed <= copied()
    assert not [path for path in copied() if ignored(path)]
    (install,) = [i for i in instructions("RUN") if "pip install" in i]
    assert '"/src${PIP_EXTRAS:+[$PIP_EXTRAS]}"' in install


def test_build_context_leaves_out_set_up_outputs_and_tests() -> None:
    for path in (".venv", ".cache", "tests", ".git", "koordlet/__pycache__"):
        assert ignored(path), f"{path} would be sent to the build"


def test_image_has_bcc_reachable_from_its_python() -> None:
    run = " ".join(instructions("RUN"))
    assert "python3-bpfcc" in run
    assert "/usr/lib/python3/dist-packages/bcc" in run and "koord-bcc.pth" in run
    assert "import bcc" in run


def test_exposed_port_is_koordlets_and_the_charts() -> None:
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    port = values["koordlet"]["metrics"]["port"]
    assert instructions("EXPOSE") == [str(port)]
    assert build_parser().parse_args([]).addr == f":{port}"
    # the chart's own image (koordlet.image.repository empty), as the Containerfile tags it
    assert values["koordlet"]["image"]["repository"] == ""
    helpers = (helm.CHART / "templates" / "_helpers.tpl").read_text()
    found = re.search(r'define "koordinator-py\.defaultRepository" -\}\}\n(\S+)\n', helpers)
    assert found, "_helpers.tpl defines koordinator-py.defaultRepository"
    assert f"-t {found.group(1)}:" in CONTAINERFILE
