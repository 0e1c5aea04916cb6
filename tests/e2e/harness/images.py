"""Build tiny OCI images from Debian's busybox-static, since no registry is reachable.

Each image is one uncompressed layer holding ``bin/busybox`` and a symlink per applet, plus an
image config, a manifest and an OCI image-layout tarball (``oci-layout``, ``index.json``,
``blobs/sha256/...``) that ``ctr images import`` takes. Output is deterministic: the same busybox
gives byte-identical tarballs.

Run as ``python -m tests.e2e.harness.images OUT_DIR`` (the set-up script does).
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class ImageSpec:
    """One image to build: its reference, its tarball's file name and its default command."""

    ref: str
    filename: str
    cmd: tuple[str, ...]


# The sandbox ("pause") image only has to sit there; the workload image runs test commands.
PAUSE = ImageSpec("localhost/koord-pause:1", "pause.tar", ("/bin/sleep", "infinity"))
WORKLOAD = ImageSpec("localhost/koord-busybox:1", "busybox.tar", ("/bin/sleep", "infinity"))
ALL_IMAGES = (PAUSE, WORKLOAD)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add(tar: tarfile.TarFile, info: tarfile.TarInfo, data: bytes | None = None) -> None:
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def layer_tar(busybox: bytes, applets: list[str]) -> bytes:
    """A layer with bin/busybox, a bin/<applet> symlink per applet and an empty tmp/."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("bin", "tmp"):
            d = tarfile.TarInfo(name)
            d.type = tarfile.DIRTYPE
            d.mode = 0o1777 if name == "tmp" else 0o755
            _add(tar, d)
        exe = tarfile.TarInfo("bin/busybox")
        exe.size = len(busybox)
        exe.mode = 0o755
        _add(tar, exe, busybox)
        for applet in sorted(set(applets) - {"busybox"}):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            link.mode = 0o777
            _add(tar, link)
    return buf.getvalue()


def image_archive(spec: ImageSpec, layer: bytes, path: str = "/bin") -> bytes:
    """An OCI image-layout tarball holding ``layer`` under the reference of ``spec``, whose
    processes get ``path`` as PATH."""
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": list(spec.cmd), "Env": [f"PATH={path}"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {"mediaType": MEDIA_CONFIG, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": MEDIA_LAYER, "digest": _digest(layer), "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    tag = spec.ref.rsplit(":", 1)[1]
    index = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": MEDIA_MANIFEST,
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": spec.ref,
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        },
        sort_keys=True,
    ).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("blobs", "blobs/sha256"):
            d = tarfile.TarInfo(name)
            d.type = tarfile.DIRTYPE
            d.mode = 0o755
            _add(tar, d)
        files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index)]
        files += [(f"blobs/sha256/{_digest(b)[7:]}", b) for b in (layer, config, manifest)]
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            _add(tar, info, data)
    return buf.getvalue()


def busybox_applets(busybox: Path = BUSYBOX) -> list[str]:
    """The applets this busybox binary provides (``busybox --list``)."""
    out = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def build_all(out_dir: Path, busybox: Path = BUSYBOX) -> dict[str, Path]:
    """Write every image tarball into ``out_dir``; return reference -> tarball path."""
    layer = layer_tar(busybox.read_bytes(), busybox_applets(busybox))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for spec in ALL_IMAGES:
        path = out_dir / spec.filename
        path.write_bytes(image_archive(spec, layer))
        written[spec.ref] = path
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.e2e.harness.images OUT_DIR", file=sys.stderr)
        return 2
    if not BUSYBOX.exists():
        print(f"images: {BUSYBOX} is missing: apt-get install busybox-static", file=sys.stderr)
        return 1
    for ref, path in build_all(Path(argv[0])).items():
        print(f"images: {ref} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
