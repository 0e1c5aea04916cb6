"""A pod network of the test's own, for pods that are not on the host network.

The chart's koord-manager and koord-scheduler pods have their own network namespace, as on a
cluster; containerd gives them one through CNI. The network is a Linux bridge made and removed
here (a name and a /24 no other interface uses), the standard ``bridge`` and ``host-local``
plugins from Debian's containernetworking-plugins, and a CNI configuration in the private
containerd's own folders. The bridge holds the first address of the subnet, so the host reaches
every pod and every pod reaches the host there: that address is where a test serves what a pod
must call (the API server).

Nothing outside what is made here changes: the bridge is not the pods' gateway (``isGateway``
would turn on the host's IP forwarding), nothing is masqueraded (no iptables rules), and
host-local keeps its leases under the containerd's folder. containerd's CNI library caches each
attachment's result in /var/lib/cni/results (a path containerd does not let us move) and deletes
it at the pod's DEL; the folders are removed again if the network made them.

Usage::

    net = PodNetwork.create(node)        # containerd's CRI reports the network ready
    ...                                  # pods started now get an address on net.subnet
    node.teardown()                      # CNI DEL for every sandbox, while the config is here
    problems = net.remove()              # the bridge is deleted
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import deadline, scaled

# Where Debian's containernetworking-plugins puts the plugins (set-up installs it).
PLUGIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
# bridge and host-local for the pod's interface; loopback is what containerd runs for "lo".
PLUGINS = ("bridge", "host-local", "loopback")
CONFIG_NAME = "10-koord-e2e.conflist"
RESULT_CACHE = Path("/var/lib/cni/results")  # libcni's default cacheDir, with "results" below


class PodNetworkError(RuntimeError):
    """The network could not be made (no plugins, no free subnet, containerd did not load it)."""


def plugin_dir() -> Path | None:
    """The first folder holding every plugin this network uses, or None."""
    for folder in PLUGIN_DIRS:
        if all((folder / name).is_file() for name in PLUGINS):
            return folder
    return None


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PodNetworkError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.0.0.0/8 that no route or address of this machine overlaps."""
    used: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for line in _ip("-4", "route", "show", "table", "all").splitlines():
        word = line.split()[0] if line.split() else ""
        if word not in ("", "default", "broadcast", "local", "unreachable"):
            used.append(ipaddress.ip_network(word, strict=False))
    for line in _ip("-4", "-o", "addr").splitlines():
        used.append(ipaddress.ip_network(line.split()[3], strict=False))
    for _ in range(64):
        second, third = secrets.randbelow(200) + 40, secrets.randbelow(256)
        subnet = ipaddress.IPv4Network(f"10.{second}.{third}.0/24")
        if not any(subnet.overlaps(other) for other in used):
            return subnet
    raise PodNetworkError(f"no free /24 in 10.0.0.0/8 among {len(used)} routes and addresses")


@dataclass
class PodNetwork:
    """See the module docstring."""

    bridge: str
    subnet: ipaddress.IPv4Network
    config: Path
    made_cache: bool = False  # whether /var/lib/cni was not there before
    _removed: list[str] | None = None

    @property
    def host_address(self) -> str:
        """The bridge's address: the host as pods reach it."""
        return str(self.subnet.network_address + 1)

    @classmethod
    def create(cls, node: Node, timeout: float = 30.0) -> PodNetwork:
        plugins = plugin_dir()
        if plugins is None:
            dirs = " or ".join(map(str, PLUGIN_DIRS))
            raise PodNetworkError(f"no CNI plugins {', '.join(PLUGINS)} in {dirs}")
        base = node.containerd.layout.base / "cni"
        for name in PLUGINS:
            link = base / "bin" / name
            if not link.exists():
                link.symlink_to(plugins / name)
        net = cls(f"kpy{secrets.token_hex(4)}", _free_subnet(), base / "conf" / CONFIG_NAME)
        net.made_cache = not RESULT_CACHE.parent.exists()
        _ip("link", "add", net.bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{net.host_address}/{net.subnet.prefixlen}", "dev", net.bridge)
            _ip("link", "set", net.bridge, "up")
            net.config.write_text(json.dumps(net.conflist(base / "ipam"), indent=2))
            net.wait_ready(node, timeout)
        except BaseException:
            net.remove()
            raise
        return net

    def conflist(self, ipam_dir: Path) -> dict[str, object]:
        first = self.subnet.network_address + 2
        return {
            "cniVersion": "0.4.0",
            "name": "koord-e2e",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": False,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(ipam_dir),
                        "ranges": [[{"subnet": str(self.subnet), "rangeStart": str(first)}]],
                    },
                }
            ],
        }

    @staticmethod
    def wait_ready(node: Node, timeout: float) -> None:
        """Until CRI reports NetworkReady (containerd reads the config folder as it changes)."""
        pb = node.cri.pb
        end = deadline(timeout)
        while time.monotonic() < end:
            status = node.cri.runtime.Status(pb.StatusRequest(), timeout=scaled(2.0))
            ready = [c.status for c in status.status.conditions if c.type == "NetworkReady"]
            if ready and all(ready):
                return
            time.sleep(0.2)
        raise PodNetworkError(
            f"containerd did not load the CNI config in {scaled(timeout):g}s "
            f"(conditions: {status.status.conditions})"
        )

    def remove(self) -> list[str]:
        """Delete the config and the bridge; what could not be removed (empty on success).
        Calling it again returns the first call's result."""
        if self._removed is not None:
            return self._removed
        problems = []
        self.config.unlink(missing_ok=True)
        try:
            _ip("link", "del", self.bridge)
        except PodNetworkError as err:
            problems.append(str(err))
        if self.made_cache:
            for folder in (RESULT_CACHE, RESULT_CACHE.parent):
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as err:  # a result left behind: a pod without its DEL
                    problems.append(f"{folder}: {err}")
        self._removed = problems
        return problems
