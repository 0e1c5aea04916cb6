"""koordctl install on fake node trees: what is written, what is refused, what is rolled back."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import koordctl as ctl
from koordlet.install.containerd import (
    ContainerdConfigError,
    parse_version,
    read_nri_settings,
)
from koordlet.install.installer import (
    InstallError,
    InstallOptions,
    install_nri_plugin,
    install_systemd,
    launcher_script,
    unit_file,
)
from koordlet.install.transaction import Transaction

KOORDLET = Path(sys.executable).parent / "koordlet"


def fake_containerd(folder: Path, version: str = "1.7.24") -> str:
    binary = folder / "containerd"
    binary.write_text(
        f"#!/bin/sh\necho 'containerd github.com/containerd/containerd {version}~ds1 1.7.24'\n"
    )
    binary.chmod(0o755)
    return str(binary)


def node_tree(tmp_path: Path, config: str | None = "version = 2\n", systemd: bool = True) -> Path:
    root = tmp_path / "root"
    (root / "etc/containerd").mkdir(parents=True)
    if config is not None:
        (root / "etc/containerd/config.toml").write_text(config)
    if systemd:
        (root / "run/systemd/system").mkdir(parents=True)
    return root


def options(tmp_path: Path, root: Path, **kw: object) -> InstallOptions:
    return InstallOptions(root=root, containerd_bin=fake_containerd(tmp_path), **kw)  # type: ignore[arg-type]


class Recorder:
    def __init__(self, fail_on: str = "") -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    def __call__(self, args: Sequence[str]) -> None:
        self.calls.append(list(args))
        if args[0] == self.fail_on:
            raise InstallError(f"systemctl {args[0]} failed: boom")


def files_under(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text() if p.is_file() else "<dir>"
        for p in sorted(root.rglob("*"))
    }


# -- containerd's configuration -------------------------------------------------------------


def test_nri_is_off_by_default_in_containerd_1_and_on_in_2(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("version = 2\n")
    assert not read_nri_settings(config, 1).enabled
    assert read_nri_settings(config, 2).enabled
    assert not read_nri_settings(tmp_path / "missing.toml", 1).enabled


def test_imports_merge_over_the_main_file_later_files_winning(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "config.toml").write_text(
        'version = 2\nimports = ["conf.d/*.toml"]\n'
        '[plugins."io.containerd.nri.v1.nri"]\ndisable = true\nsocket_path = "/x.sock"\n'
    )
    (tmp_path / "conf.d/10-nri.toml").write_text(
        'version = 2\n[plugins."io.containerd.nri.v1.nri"]\ndisable = false\n'
    )
    (tmp_path / "conf.d/20-nri.toml").write_text(
        'version = 2\n[plugins."io.containerd.nri.v1.nri"]\ndisable_connections = true\n'
    )
    nri = read_nri_settings(tmp_path / "config.toml")
    assert (nri.enabled, nri.disable_connections, nri.socket_path) == (True, True, "/x.sock")
    assert not nri.connections_allowed
    assert [f.name for f in nri.files] == ["config.toml", "10-nri.toml", "20-nri.toml"]


def test_version_1_configs_use_the_short_plugin_name(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[plugins.nri]\ndisable = false\n")
    assert read_nri_settings(config).enabled


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("version = 2\n[plugins\n", "not valid TOML"),
        ('version = 2\nimports = "conf.d"\n', "imports must be a list"),
        ('version = 2\n[plugins]\n"io.containerd.nri.v1.nri" = 1\n', "is not a table"),
    ],
)
def test_a_broken_config_is_an_error_naming_the_file(
    tmp_path: Path, text: str, reason: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ContainerdConfigError, match=reason):
        read_nri_settings(config)


def test_versions_are_read_from_containerds_banner() -> None:
    assert parse_version("containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24") == (
        1,
        7,
        24,
    )
    assert parse_version("containerd containerd.io v2.0.1 88aa2f") == (2, 0, 1)
    assert parse_version("nothing here") is None


# -- systemd ---------------------------------------------------------------------------------


def test_systemd_install_writes_the_unit_env_and_nri_drop_in_and_enables(tmp_path: Path) -> None:
    root = node_tree(tmp_path, 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    systemctl = Recorder()
    steps = install_systemd(
        options(tmp_path, root, koordlet_args="--feature-gates=CPUBurst=true"), systemctl
    )

    unit = (root / "etc/systemd/system/koordlet.service").read_text()
    assert f"ExecStart={KOORDLET} $KOORDLET_ARGS" in unit and "@KOORDLET@" not in unit
    assert "Type=notify" in unit
    env = (root / "etc/koordlet/koordlet.env").read_text()
    assert 'KOORDLET_ARGS="--feature-gates=CPUBurst=true"' in env
    drop_in = root / "etc/containerd/conf.d/koordlet-nri.toml"
    assert read_nri_settings(root / "etc/containerd/config.toml", 1, root).connections_allowed
    assert drop_in.exists()
    assert systemctl.calls == [["enable", "koordlet.service"]]  # another root: offline only
    assert any("systemctl restart containerd" in step for step in steps)


def test_on_this_root_systemd_reloads_enables_and_starts_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = node_tree(tmp_path)
    systemctl = Recorder()
    opts = options(tmp_path, root)
    monkeypatch.setattr(InstallOptions, "on_node", lambda self, p: root / str(p).lstrip("/"))
    install_systemd(InstallOptions(**{**opts.__dict__, "root": Path("/")}), systemctl)
    assert systemctl.calls == [
        ["daemon-reload"],
        ["enable", "koordlet.service"],
        ["start", "--no-block", "koordlet.service"],
    ]


def test_the_enable_symlink_is_made_by_the_real_systemctl(tmp_path: Path) -> None:
    if shutil.which("systemctl") is None:
        pytest.fail("systemctl is missing (Debian's systemd package)")
    root = node_tree(tmp_path)
    assert ctl.main(["install", "--systemd", "--root", str(root), "--containerd-bin",
                     fake_containerd(tmp_path)]) == 0  # fmt: skip
    wants = root / "etc/systemd/system/multi-user.target.wants/koordlet.service"
    assert wants.is_symlink()
    assert str(wants.readlink()) == "/etc/systemd/system/koordlet.service"


def test_the_installed_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing (Debian's systemd package)")
    root = node_tree(tmp_path)
    install_systemd(options(tmp_path, root), Recorder())
    unit = tmp_path / "koordlet.service"
    shutil.copy(root / "etc/systemd/system/koordlet.service", unit)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""  # no unknown key, no missing executable


def test_an_existing_env_file_is_kept(tmp_path: Path) -> None:
    root = node_tree(tmp_path)
    env = root / "etc/koordlet/koordlet.env"
    env.parent.mkdir(parents=True)
    env.write_text('KOORDLET_ARGS="--log-level=debug"\n')
    steps = install_systemd(options(tmp_path, root, koordlet_args="--other"), Recorder())
    assert env.read_text() == 'KOORDLET_ARGS="--log-level=debug"\n'
    assert f"kept {env} (exists)" in steps


def test_the_nri_section_is_appended_to_a_main_file_without_imports(tmp_path: Path) -> None:
    original = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "p:1"\n'
    root = node_tree(tmp_path, original)
    install_systemd(options(tmp_path, root), Recorder())
    text = (root / "etc/containerd/config.toml").read_text()
    assert text.startswith(original)
    assert read_nri_settings(root / "etc/containerd/config.toml").connections_allowed


def test_a_missing_containerd_config_is_created_with_nri_on(tmp_path: Path) -> None:
    root = node_tree(tmp_path, config=None)
    install_systemd(options(tmp_path, root), Recorder())
    assert read_nri_settings(root / "etc/containerd/config.toml").connections_allowed


def test_nri_already_on_leaves_containerds_config_alone(tmp_path: Path) -> None:
    config = 'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n'
    root = node_tree(tmp_path, config)
    steps = install_systemd(options(tmp_path, root), Recorder())
    assert (root / "etc/containerd/config.toml").read_text() == config
    assert not any("restart containerd" in step for step in steps)


@pytest.mark.parametrize(
    ("config", "systemd", "binary_version", "reason"),
    [
        ("version = 2\n", False, "1.7.24", "systemd is not running"),
        ("version = 2\n", True, None, "containerd not found"),
        ("version = 2\n", True, "1.6.20", "has no NRI"),
        ("version = 2\n[plugins\n", True, "1.7.24", "not valid TOML"),
        (
            'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n disable_connections = true\n'
            " disable = false\n",
            True,
            "1.7.24",
            "disable_connections = true",
        ),
        (
            'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n disable = true\n',
            True,
            "1.7.24",
            "set disable = false",
        ),
        ("[plugins.cri]\nx = 1\n", True, "1.7.24", "version 1 format"),
    ],
)
def test_refusals_write_nothing(
    tmp_path: Path, config: str, systemd: bool, binary_version: str | None, reason: str
) -> None:
    root = node_tree(tmp_path, config, systemd=systemd)
    before = files_under(root)
    binary = fake_containerd(tmp_path, binary_version) if binary_version else str(tmp_path / "none")
    systemctl = Recorder()
    with pytest.raises(InstallError, match=reason):
        install_systemd(InstallOptions(root=root, containerd_bin=binary), systemctl)
    assert files_under(root) == before
    assert systemctl.calls == []


def test_an_unreadable_config_is_refused_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = node_tree(tmp_path, config=None)
    (root / "etc/containerd/config.toml").mkdir()  # root reads every file: a folder cannot
    before = files_under(root)
    code = ctl.main(["install", "--systemd", "--root", str(root), "--containerd-bin",
                     fake_containerd(tmp_path)])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "cannot read" in err and "nothing was installed" in err
    assert files_under(root) == before


def test_a_failing_systemctl_rolls_every_write_back(tmp_path: Path) -> None:
    original = "version = 2\n"
    root = node_tree(tmp_path, original)
    before = files_under(root)
    systemctl = Recorder(fail_on="enable")
    with pytest.raises(InstallError, match="boom"):
        install_systemd(options(tmp_path, root), systemctl)
    assert files_under(root) == before
    assert (root / "etc/containerd/config.toml").read_text() == original


def test_a_failed_start_disables_the_unit_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = node_tree(tmp_path)
    before = files_under(root)
    monkeypatch.setattr(InstallOptions, "on_node", lambda self, p: root / str(p).lstrip("/"))
    opts = InstallOptions(root=Path("/"), containerd_bin=fake_containerd(tmp_path))
    systemctl = Recorder(fail_on="start")
    with pytest.raises(InstallError):
        install_systemd(opts, systemctl)
    assert systemctl.calls[-1] == ["disable", "koordlet.service"]
    assert files_under(root) == before


def test_systemd_install_refuses_when_the_nri_plugin_is_installed(tmp_path: Path) -> None:
    root = node_tree(tmp_path)
    plugin = root / "opt/nri/plugins/00-koordlet"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("#!/bin/sh\n")
    with pytest.raises(InstallError, match="alternatives"):
        install_systemd(options(tmp_path, root), Recorder())


# -- the pre-installed NRI plugin ------------------------------------------------------------


def test_nri_plugin_install_places_an_executable_launcher(tmp_path: Path) -> None:
    root = node_tree(tmp_path, systemd=False)  # no systemd needed for this mode
    steps = install_nri_plugin(options(tmp_path, root))
    plugin = root / "opt/nri/plugins/00-koordlet"
    assert plugin.stat().st_mode & 0o777 == 0o755
    text = plugin.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert f"exec '{sys.executable}' -m koordlet.preinstalled" in text
    assert "--env-file '/etc/koordlet/koordlet.env'" in text
    assert read_nri_settings(root / "etc/containerd/config.toml").enabled
    assert any("restart containerd" in step for step in steps)


def test_nri_plugin_goes_to_containerds_plugin_path_or_the_one_given(tmp_path: Path) -> None:
    config = (
        'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n disable = false\n'
        ' disable_connections = true\n plugin_path = "/usr/lib/nri"\n'
    )
    root = node_tree(tmp_path, config)
    install_nri_plugin(options(tmp_path, root))  # connections are not needed in this mode
    assert (root / "usr/lib/nri/00-koordlet").exists()
    other = node_tree(tmp_path / "b", config)
    install_nri_plugin(options(tmp_path, other, plugin_path=Path("/srv/plugins")))
    assert (other / "srv/plugins/00-koordlet").exists()


def test_nri_plugin_install_refuses_beside_the_systemd_service(tmp_path: Path) -> None:
    root = node_tree(tmp_path)
    install_systemd(options(tmp_path, root), Recorder())
    before = files_under(root)
    with pytest.raises(InstallError, match="alternatives"):
        install_nri_plugin(options(tmp_path, root))
    assert files_under(root) == before


def test_the_launcher_runs_under_sh() -> None:
    opts = InstallOptions(python=Path("/opt/k/bin/python3"), config_dir=Path("/etc/k"))
    script = launcher_script(opts)
    done = subprocess.run(["sh", "-n"], input=script, text=True, check=False)
    assert done.returncode == 0
    exec_line = (
        "exec '/opt/k/bin/python3' -m koordlet.preinstalled --env-file '/etc/k/koordlet.env'"
    )
    assert exec_line in script


def test_the_shipped_units_are_the_repositorys_systemd_files() -> None:
    repo = Path(__file__).resolve().parents[3] / "systemd"
    assert (repo / "koordlet.service").read_text() == unit_file("koordlet.service")
    assert (repo / "containerd-nri.toml").read_text() == unit_file("containerd-nri.toml")


# -- rollback --------------------------------------------------------------------------------


def test_rollback_restores_changed_files_and_removes_created_ones(tmp_path: Path) -> None:
    kept = tmp_path / "kept.toml"
    kept.write_text("a = 1\n")
    kept.chmod(0o600)
    tx = Transaction()
    tx.append(kept, "b = 2\n")
    tx.write(tmp_path / "new/deeper/file", "x")
    tx.write(kept, "replaced")
    tx.rollback()
    assert kept.read_text() == "a = 1\n" and kept.stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "new").exists()
