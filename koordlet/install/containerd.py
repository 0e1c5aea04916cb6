"""What containerd's configuration says about NRI, read the way containerd reads it.

One place for the question "is NRI on, and may external plugins connect?", asked by
``koordctl doctor`` and ``koordctl install``. containerd merges ``imports`` (glob patterns,
relative paths resolved against the main file's folder) over the main file, later files
winning key by key; the NRI section is ``[plugins."io.containerd.nri.v1.nri"]`` in config
versions 2 and 3 and ``[plugins.nri]`` in version 1. Without the section, NRI is off in
containerd 1.x and on from 2.0.
"""

from __future__ import annotations

import glob
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = Path("/etc/containerd/config.toml")
NRI_SECTION = "io.containerd.nri.v1.nri"
NRI_SECTION_V1 = "nri"
DEFAULT_SOCKET = "/var/run/nri/nri.sock"
DEFAULT_PLUGIN_PATH = "/opt/nri/plugins"
DEFAULT_PLUGIN_CONFIG_PATH = "/etc/nri/conf.d"

_VERSION = re.compile(r"\bv?(\d+)\.(\d+)\.(\d+)")


class ContainerdConfigError(Exception):
    """The configuration (or one of its imports) cannot be read or parsed."""


@dataclass(frozen=True)
class NRISettings:
    """NRI as containerd would run it with this configuration."""

    enabled: bool
    disable_connections: bool
    socket_path: str
    plugin_path: str
    plugin_config_path: str
    explicit: bool  # the section is present (else containerd's defaults apply)
    files: tuple[Path, ...]  # the main file and the imports read, in merge order
    imports: tuple[str, ...]  # the import patterns, resolved
    version: int = 2  # the configuration format

    @property
    def connections_allowed(self) -> bool:
        return self.enabled and not self.disable_connections


def _load(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as err:
        raise ContainerdConfigError(f"cannot read {path}: {err.strerror or err}") from err
    except tomllib.TOMLDecodeError as err:
        raise ContainerdConfigError(f"{path} is not valid TOML: {err}") from err


def _merge(base: dict[str, Any], over: dict[str, Any]) -> None:
    """containerd's merge: tables merge key by key, anything else is replaced."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def import_patterns(config: dict[str, Any], main: Path, root: Path = Path("/")) -> list[str]:
    """The import globs as paths on this machine (absolute ones re-rooted under ``root``)."""
    patterns = config.get("imports", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise ContainerdConfigError(f"{main}: imports must be a list of paths")
    return [
        str(root / p.lstrip("/")) if p.startswith("/") else str(main.parent / p) for p in patterns
    ]


def load_merged(path: Path, root: Path = Path("/")) -> tuple[dict[str, Any], list[Path], list[str]]:
    """The main file merged with its imports; the files read and the resolved patterns.

    A missing main file is containerd's defaults: an empty table.
    """
    if not path.exists():
        return {}, [], []
    merged = _load(path)
    files, patterns = [path], import_patterns(merged, path, root)
    for pattern in patterns:
        for name in sorted(glob.glob(pattern)):  # noqa: PTH207 - a pattern with folders
            _merge(merged, _load(Path(name)))
            files.append(Path(name))
    return merged, files, patterns


def read_nri_settings(
    path: Path = DEFAULT_CONFIG, containerd_major: int = 1, root: Path = Path("/")
) -> NRISettings:
    """NRI's settings from ``path`` and its imports; a missing main file means defaults.

    ``root`` re-roots absolute import paths, for a node's file tree mounted elsewhere.
    """
    merged, files, patterns = load_merged(path, root)
    version = merged.get("version", 1)
    plugins = merged.get("plugins", {})
    key = NRI_SECTION_V1 if version == 1 else NRI_SECTION
    section = plugins.get(key) if isinstance(plugins, dict) else None
    if section is not None and not isinstance(section, dict):
        raise ContainerdConfigError(f"{path}: plugins.{key} is not a table")
    nri = section or {}
    return NRISettings(
        enabled=not bool(nri.get("disable", containerd_major < 2)),
        disable_connections=bool(nri.get("disable_connections", False)),
        socket_path=str(nri.get("socket_path") or DEFAULT_SOCKET),
        plugin_path=str(nri.get("plugin_path") or DEFAULT_PLUGIN_PATH),
        plugin_config_path=str(nri.get("plugin_config_path") or DEFAULT_PLUGIN_CONFIG_PATH),
        explicit=section is not None,
        files=tuple(files),
        imports=tuple(patterns),
        version=version if isinstance(version, int) else 1,
    )


def parse_version(text: str) -> tuple[int, int, int] | None:
    """ "containerd github.com/containerd/containerd 1.7.24~ds1 ..." → (1, 7, 24)."""
    found = _VERSION.search(text)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def containerd_version(binary: str = "containerd") -> tuple[int, int, int] | None:
    """The installed containerd's version, or None when it cannot be run."""
    try:
        done = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(done.stdout) if done.returncode == 0 else None


# The CRI plugin's runtime settings, by config version (containerd 2.x moved them).
CRI_SECTIONS = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


def _table(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    for key in keys:
        value = data.get(key)
        data = value if isinstance(value, dict) else {}
    return data


def read_systemd_cgroup(path: Path = DEFAULT_CONFIG, root: Path = Path("/")) -> bool:
    """runc's ``SystemdCgroup`` (the CRI containers' cgroup driver) from ``path`` and its
    imports, for the default runtime; False (cgroupfs, containerd's default) when unset."""
    merged, _, _ = load_merged(path, root)
    version = merged.get("version", 1)
    section = CRI_SECTIONS.get(version, CRI_SECTIONS[2]) if isinstance(version, int) else "cri"
    cri = _table(merged, "plugins", section, "containerd")
    runtime = str(cri.get("default_runtime_name") or "runc")
    return bool(_table(cri, "runtimes", runtime, "options").get("SystemdCgroup", False))
