"""``koordctl install``: koordlet as a systemd service or as containerd's pre-installed plugin.

Both check the node first (containerd 1.7+ present, its configuration readable, systemd running
for the service) and write nothing when a check fails; a failure after the first write rolls
every write back. NRI is turned on in containerd's configuration when it is off: a drop-in in a
folder the main file imports, else the section appended to the main file (whose previous content
is restored on rollback). A section written by somebody that turns NRI off is not overridden;
the message says which line to change.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from koordlet.install.containerd import (
    DEFAULT_CONFIG,
    NRI_SECTION,
    ContainerdConfigError,
    NRISettings,
    containerd_version,
    read_nri_settings,
)
from koordlet.install.transaction import Transaction

UNIT_PATH = Path("/etc/systemd/system/koordlet.service")
PLUGIN_NAME = "00-koordlet"  # runs first: other plugins see koordlet's adjustments
DROP_IN_NAME = "koordlet-nri.toml"
ENV_FILE_NAME = "koordlet.env"
DEFAULT_CONFIG_DIR = Path("/etc/koordlet")
DEFAULT_PLUGIN_LOG = Path("/var/log/koordlet/nri-plugin.log")
RESTART_CONTAINERD = "systemctl restart containerd (running containers keep running)"

Systemctl = Callable[[Sequence[str]], None]


class InstallError(Exception):
    """A check failed or a step could not be done; nothing stays installed."""


def unit_file(name: str) -> str:
    """A file shipped in koordlet/install/units (also linked from the repository's systemd/)."""
    return resources.files("koordlet.install").joinpath("units", name).read_text()


def default_koordlet() -> Path:
    return Path(sys.executable).parent / "koordlet"


@dataclass(frozen=True)
class InstallOptions:
    """Where things go. Paths are as the node sees them; ``root`` prefixes them all."""

    root: Path = Path("/")
    containerd_config: Path = DEFAULT_CONFIG
    containerd_bin: str = "containerd"
    config_dir: Path = DEFAULT_CONFIG_DIR
    plugin_path: Path | None = None  # default: containerd's plugin_path
    koordlet_bin: Path = field(default_factory=default_koordlet)
    python: Path = Path(sys.executable)
    koordlet_args: str = ""  # written into a new koordlet.env; an existing one is kept
    start: bool = True

    def on_node(self, path: Path | str) -> Path:
        return self.root / str(path).lstrip("/")


def real_systemctl(root: Path) -> Systemctl:
    """systemctl on this machine; for another root only offline commands (enable) work."""

    def run(args: Sequence[str]) -> None:
        where = [] if root == Path("/") else [f"--root={root}"]
        try:
            done = subprocess.run(
                ["systemctl", *where, *args],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise InstallError(f"systemctl {' '.join(args)}: {err}") from err
        if done.returncode != 0:
            reason = done.stderr.strip() or f"exit status {done.returncode}"
            raise InstallError(f"systemctl {' '.join(args)} failed: {reason}")

    return run


def check_containerd(options: InstallOptions) -> NRISettings:
    """containerd 1.7+ is installed and its configuration reads; its NRI settings."""
    version = containerd_version(options.containerd_bin)
    if version is None:
        raise InstallError(
            f"containerd not found: `{options.containerd_bin} --version` did not run "
            "(install containerd 1.7 or newer, or name the binary with --containerd-bin)"
        )
    if version < (1, 7, 0):
        raise InstallError(
            "containerd {}.{}.{} has no NRI: koordlet needs containerd 1.7 or newer".format(
                *version
            )
        )
    try:
        return read_nri_settings(
            options.on_node(options.containerd_config), version[0], options.root
        )
    except ContainerdConfigError as err:
        raise InstallError(f"cannot use containerd's configuration: {err}") from err


def _nri_section_text() -> str:
    """The drop-in's NRI table alone, to append to a main file that has its own header."""
    text = unit_file("containerd-nri.toml")
    return text[text.index("[plugins.") :]


def _import_folder(settings: NRISettings) -> Path | None:
    for pattern in settings.imports:
        folder, _, name = pattern.rpartition("/")
        if name == "*.toml" and "*" not in folder:
            return Path(folder)
    return None


def enable_nri(
    tx: Transaction, options: InstallOptions, settings: NRISettings, connections: bool
) -> str | None:
    """Turn NRI on in containerd's configuration if needed; what was done, or None."""
    files = ", ".join(str(f) for f in settings.files) or str(options.containerd_config)
    section = f'[plugins."{NRI_SECTION}"]'
    if settings.enabled:
        if connections and settings.disable_connections:
            raise InstallError(
                f"containerd's NRI has disable_connections = true ({files}), which keeps "
                "koordlet out: it connects as an external plugin. Set disable_connections = "
                f"false under {section} and {RESTART_CONTAINERD}, or install koordlet as the "
                "pre-installed plugin instead (koordctl install --nri-plugin)"
            )
        return None
    if settings.explicit:
        raise InstallError(
            f"containerd's configuration turns NRI off ({files}): set disable = false under "
            f"{section}, then {RESTART_CONTAINERD}"
        )
    main = options.on_node(options.containerd_config)
    folder = _import_folder(settings)
    if folder is not None:
        target = folder / DROP_IN_NAME
        tx.write(target, unit_file("containerd-nri.toml"))
    elif not main.exists():
        target = main
        tx.write(target, unit_file("containerd-nri.toml"))
    elif settings.version < 2:
        raise InstallError(
            f"{main} uses the version 1 format: migrate it (containerd config migrate) and "
            f"add {section} with disable = false"
        )
    else:
        target = main
        tx.append(target, "\n" + _nri_section_text())
    try:
        after = read_nri_settings(main, 1, options.root)
    except ContainerdConfigError as err:
        raise InstallError(f"turning NRI on broke {target}: {err}") from err
    if not after.enabled or (connections and not after.connections_allowed):
        raise InstallError(f"NRI is still off after writing {target}: check {files}")
    return f"turned NRI on in {target}; {RESTART_CONTAINERD}"


def _env_file(tx: Transaction, options: InstallOptions, done: list[str]) -> Path:
    """koordlet.env, written when missing (an operator's edits are kept)."""
    path = options.config_dir / ENV_FILE_NAME
    local = options.on_node(path)
    if local.exists():
        done.append(f"kept {local} (exists)")
        return path
    tx.write(
        local,
        "# koordlet's settings, read by koordlet.service and by the pre-installed NRI plugin.\n"
        "# KOORDLET_ARGS: koordlet's flags (koordlet --help), e.g. --feature-gates=CPUBurst=true\n"
        f'KOORDLET_ARGS="{options.koordlet_args}"\n'
        "# NODE_NAME: the node's name in Kubernetes, when it is not the hostname.\n"
        "#NODE_NAME=\n"
        "# KOORDLET_LOG_FILE: the pre-installed plugin's log (containerd discards its output).\n"
        f"#KOORDLET_LOG_FILE={DEFAULT_PLUGIN_LOG}\n",
    )
    done.append(f"wrote {local}")
    return path


def _plugin_folder(options: InstallOptions, settings: NRISettings) -> Path:
    return options.plugin_path or Path(settings.plugin_path)


def install_systemd(options: InstallOptions, systemctl: Systemctl | None = None) -> list[str]:
    """Install and enable koordlet.service; the steps done, for the operator."""
    if not options.on_node("/run/systemd/system").is_dir():
        raise InstallError(
            "systemd is not running on this node (no /run/systemd/system): run koordlet from "
            "the Helm chart's DaemonSet or as containerd's plugin (koordctl install --nri-plugin)"
        )
    settings = check_containerd(options)
    plugin = options.on_node(_plugin_folder(options, settings) / PLUGIN_NAME)
    if plugin.exists():
        raise InstallError(
            f"koordlet is installed as containerd's pre-installed plugin ({plugin}); the two "
            "modes are alternatives: remove that file and restart containerd first"
        )
    if not options.koordlet_bin.is_file():
        raise InstallError(f"no koordlet executable at {options.koordlet_bin}")
    run = systemctl or real_systemctl(options.root)
    tx, done, enabled = Transaction(), list[str](), False
    try:
        unit = options.on_node(UNIT_PATH)
        tx.write(
            unit, unit_file("koordlet.service").replace("@KOORDLET@", str(options.koordlet_bin))
        )
        done.append(f"wrote {unit}")
        _env_file(tx, options, done)
        nri = enable_nri(tx, options, settings, connections=True)
        online = options.root == Path("/")
        if online:
            run(["daemon-reload"])
        run(["enable", "koordlet.service"])
        enabled = True
        done.append("enabled koordlet.service")
        if online and options.start:
            # --no-block: readiness waits for NRI registration, which may wait for containerd.
            run(["start", "--no-block", "koordlet.service"])
            done.append("started koordlet.service (ready once registered with NRI)")
    except BaseException:
        if enabled:
            try:
                run(["disable", "koordlet.service"])
            except InstallError as err:
                done.append(f"could not disable koordlet.service again: {err}")
        tx.rollback()
        raise
    if nri:
        done.append(nri)
    done.append("check the node: koordctl doctor")
    return done


def launcher_script(options: InstallOptions) -> str:
    env_file = options.config_dir / ENV_FILE_NAME
    return (
        "#!/bin/sh\n"
        "# koordlet as containerd's pre-installed NRI plugin (koordctl install --nri-plugin).\n"
        "# containerd runs it with the NRI socket on fd 3 and no other environment. It always\n"
        "# registers, as a no-op plugin if koordlet cannot start: containerd 1.7 exits when a\n"
        "# pre-installed plugin fails to register.\n"
        f"exec '{options.python}' -m koordlet.preinstalled --env-file '{env_file}'\n"
    )


def install_nri_plugin(options: InstallOptions) -> list[str]:
    """Put koordlet into containerd's plugin folder; the steps done, for the operator."""
    settings = check_containerd(options)
    unit = options.on_node(UNIT_PATH)
    if unit.exists():
        raise InstallError(
            f"koordlet.service is installed ({unit}); the two modes are alternatives: "
            f"systemctl disable --now koordlet.service and remove {unit} first"
        )
    folder = options.on_node(_plugin_folder(options, settings))
    tx, done = Transaction(), list[str]()
    try:
        _env_file(tx, options, done)
        plugin = folder / PLUGIN_NAME
        tx.write(plugin, launcher_script(options), mode=0o755)
        done.append(f"wrote {plugin}")
        nri = enable_nri(tx, options, settings, connections=False)
    except BaseException:
        tx.rollback()
        raise
    if nri:
        done.append(nri)
    done.append(f"containerd launches it when it starts: {RESTART_CONTAINERD}")
    return done
