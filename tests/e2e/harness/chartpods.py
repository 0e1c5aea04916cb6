"""What the chart tests share: the image on the node, HTTP to a pod, waiting on a pod's log.

The chart's pods (koordlet's DaemonSet, koord-manager's and koord-scheduler's Deployments) all
run from the one image that set-up builds from the Containerfile (.cache/images/koordlet.tar).
"""

from __future__ import annotations

import json
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.e2e.harness import paths
from tests.e2e.harness.cri import ContainerSpec
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import deadline, scaled

IMAGE_ARCHIVE = paths.IMAGES_DIR / "koordlet.tar"
OCI_REF_NAME = "org.opencontainers.image.ref.name"


def import_image(node: Node) -> None:
    """Load the image into containerd, as a node's images are side-loaded where no registry
    answers; the kubelet then finds it present (pullPolicy IfNotPresent) and pulls nothing.

    Returns once CRI reports the archive's image: CRI's image store learns of an import from
    containerd's event stream, after ``ctr`` has returned (containerd 2.1 was seen to answer
    "not found" for a moment)."""
    archive = paths.require(IMAGE_ARCHIVE, "the koordlet image (scripts/setup.sh builds it)")
    node.containerd.ctr(
        "images", "import", "--snapshotter", node.containerd.settings.snapshotter, str(archive)
    )
    with tarfile.open(archive) as tar:
        index = tar.extractfile("index.json")
        assert index is not None, f"{archive} has no index.json"
        (manifest,) = json.load(index)["manifests"]
    image = manifest["annotations"][OCI_REF_NAME]
    end = deadline(10)
    while not image_present(node, image):
        if time.monotonic() >= end:
            raise AssertionError(f"{image} is not on the node {scaled(10):g}s after the import")
        time.sleep(0.1)


def image_present(node: Node, image: str) -> bool:
    pb = node.cri.pb
    status = node.cri.images.ImageStatus(
        pb.ImageStatusRequest(image=pb.ImageSpec(image=image)), timeout=scaled(10)
    )
    return bool(status.image.id)


def http_get(host: str, port: int, path: str) -> tuple[int, str]:
    """GET as the kubelet's httpGet probe does (plain HTTP to the pod's address)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=scaled(5)) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def container_log(node: Node, pod_uid: str, spec: ContainerSpec) -> Path:
    return node.log_dir / pod_uid / spec.log_name


def wait_for(condition: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    """Poll ``condition`` (an OSError counts as not yet); else fail with the container's log
    tail."""
    end = deadline(timeout)
    while time.monotonic() < end:
        try:
            if condition():
                return
        except OSError:
            pass  # not listening yet
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log yet)"
    raise TimeoutError(f"{what} not reached in {scaled(timeout):g}s; the container's log:\n{tail}")
