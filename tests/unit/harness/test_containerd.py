from __future__ import annotations

import tomllib
from pathlib import Path

from tests.e2e.harness.containerd import Layout, Settings, mounts_under, render_config


def test_config_keeps_every_path_private_and_enables_nri(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "ctrd")
    config = tomllib.loads(render_config(layout, Settings()))

    nri = config["plugins"]["io.containerd.nri.v1.nri"]
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert config["version"] == 2
    assert nri["disable"] is False
    assert nri["disable_connections"] is False
    assert nri["socket_path"] == str(layout.nri_socket)
    assert nri["plugin_path"] == str(layout.nri_plugin_path)
    assert nri["plugin_config_path"] == str(layout.nri_plugin_config_path)
    assert cri["restrict_oom_score_adj"] is True
    private = [
        config["root"],
        config["state"],
        config["grpc"]["address"],
        config["plugins"]["io.containerd.internal.v1.opt"]["path"],
        cri["cni"]["bin_dir"],
        cri["cni"]["conf_dir"],
        *(nri[k] for k in ("socket_path", "plugin_path", "plugin_config_path")),
    ]
    assert all(Path(p).is_relative_to(layout.base) for p in private)


def test_config_can_turn_nri_and_connections_off(tmp_path: Path) -> None:
    settings = Settings(nri_enabled=False, nri_disable_connections=True, snapshotter="native")
    config = tomllib.loads(render_config(Layout(tmp_path), settings))

    assert config["plugins"]["io.containerd.nri.v1.nri"]["disable"] is True
    assert config["plugins"]["io.containerd.nri.v1.nri"]["disable_connections"] is True
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["containerd"]["snapshotter"] == "native"


def test_config_quotes_paths_safely(tmp_path: Path) -> None:
    layout = Layout(tmp_path / 'odd "name"\\dir')
    config = tomllib.loads(render_config(layout, Settings()))
    assert config["root"] == str(layout.root)


MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
90 22 0:50 / /tmp/koord-e2e-x/state/sandboxes/abc/shm rw - tmpfs shm rw
91 22 0:51 / /tmp/koord-e2e-x/root/overlay/rootfs rw - overlay overlay rw
92 22 0:52 / /tmp/koord-e2e-x/state/with\\040space rw - tmpfs tmpfs rw
93 22 0:53 / /tmp/koord-e2e-xy/other rw - tmpfs tmpfs rw
"""


def test_mounts_under_lists_only_the_base_deepest_first() -> None:
    found = mounts_under(Path("/tmp/koord-e2e-x"), MOUNTINFO)

    assert set(found) == {
        Path("/tmp/koord-e2e-x/state/sandboxes/abc/shm"),
        Path("/tmp/koord-e2e-x/root/overlay/rootfs"),
        Path("/tmp/koord-e2e-x/state/with space"),
    }
    assert found[0] == Path("/tmp/koord-e2e-x/state/sandboxes/abc/shm")
