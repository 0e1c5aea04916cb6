from __future__ import annotations

import hashlib
import io
import json
import tarfile

from tests.e2e.harness import images

BUSYBOX = b"\x7fELF fake busybox"


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def _read(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


def test_layer_holds_busybox_and_one_symlink_per_applet() -> None:
    layer = images.layer_tar(BUSYBOX, ["sleep", "sh", "busybox", "cat"])
    members = _members(layer)

    assert _read(layer, "bin/busybox") == BUSYBOX
    assert members["bin/busybox"].mode == 0o755
    assert {n for n, m in members.items() if m.issym()} == {"bin/cat", "bin/sh", "bin/sleep"}
    assert all(members[n].linkname == "busybox" for n in ("bin/cat", "bin/sh", "bin/sleep"))
    assert members["tmp"].isdir()


def test_image_build_is_deterministic() -> None:
    layer = images.layer_tar(BUSYBOX, ["sleep"])
    assert layer == images.layer_tar(BUSYBOX, ["sleep"])
    assert images.image_archive(images.PAUSE, layer) == images.image_archive(images.PAUSE, layer)


def test_archive_is_a_consistent_oci_layout_named_by_reference() -> None:
    layer = images.layer_tar(BUSYBOX, ["sleep"])
    archive = images.image_archive(images.WORKLOAD, layer)

    index = json.loads(_read(archive, "index.json"))
    (entry,) = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/koord-busybox:1"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1"

    def blob(digest: str) -> bytes:
        data = _read(archive, "blobs/sha256/" + digest.removeprefix("sha256:"))
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
        return data

    manifest = json.loads(blob(entry["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))
    assert blob(manifest["layers"][0]["digest"]) == layer
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    assert config["config"]["Cmd"] == list(images.WORKLOAD.cmd)
    assert json.loads(_read(archive, "oci-layout")) == {"imageLayoutVersion": "1.0.0"}
