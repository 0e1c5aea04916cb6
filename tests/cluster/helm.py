"""Helm's own engine (helm-sdkpy's install, upgrade and uninstall actions) against the cluster.

helm-sdkpy loads Helm as a Go shared library, whose runtime reads its environment once and
can never be unloaded; and the API server answers only inside the cluster's network namespace.
So each action runs in a child Python process started inside the namespace
(``python -m tests.cluster.helm ACTION`` with a JSON request on stdin), with Helm's home
folders in the cluster's folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.harness.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "koordinator-py"
RELEASE = "koordinator"
NAMESPACE = "koordinator-system"


class HelmFailed(RuntimeError):
    """Helm's action failed; the message is Helm's error."""


def run(netns: Path, kubeconfig: Path, home: Path, action: str, **request: Any) -> Any:
    """Run one Helm action (install, upgrade, uninstall, status) in a child inside ``netns``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBECONFIG"))}
    env |= {
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "PYTHONPATH": str(ROOT),
    }
    payload = json.dumps({"kubeconfig": str(kubeconfig), **request})
    timeout = scaled(float(request.get("timeout", 300)) + 60)
    done = subprocess.run(
        ["nsenter", f"--net={netns}", sys.executable, "-m", "tests.cluster.helm", action],
        input=payload, capture_output=True, text=True, env=env, timeout=timeout, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise HelmFailed(f"helm {action}: {done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout)


async def _act(action: str, request: dict[str, Any]) -> Any:
    import helm_sdkpy  # noqa: PLC0415 (only in the child: it loads Go's runtime)

    config = helm_sdkpy.Configuration(
        namespace=request.get("namespace", NAMESPACE), kubeconfig=request["kubeconfig"]
    )
    release = request.get("release", RELEASE)
    timeout = int(request.get("timeout", 300))
    if action == "install":
        return await helm_sdkpy.Install(config).run(
            release, request.get("chart", str(CHART)), values=request.get("values"),
            create_namespace=True, wait=True, timeout=timeout,
        )  # fmt: skip
    if action == "upgrade":
        return await helm_sdkpy.Upgrade(config).run(
            release, request.get("chart", str(CHART)), values=request.get("values"),
            wait=True, timeout=timeout,
        )  # fmt: skip
    if action == "uninstall":
        return await helm_sdkpy.Uninstall(config).run(release, wait=True, timeout=timeout)
    if action == "status":
        return await helm_sdkpy.Status(config).run(release)
    raise ValueError(f"unknown helm action {action!r}")


def main(argv: list[str]) -> int:
    request = json.load(sys.stdin)
    try:
        result = asyncio.run(_act(argv[0], request))
    except Exception as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
