"""koordlet under a real systemd with the systemd cgroup driver (the v2-systemd tier only).

* The service as users install it: ``koordctl install --systemd``, then ``systemctl start``;
  Type=notify makes the start return once koordlet registered over NRI, the watchdog is fed, a
  SIGKILL is followed by a restart and a new registration, the journal has koordlet's lines, a
  BE pod created afterwards gets its batch values, and ``koordctl doctor`` finds nothing wrong.
* systemd owns the pod slices: a ``systemctl daemon-reload`` puts back its own idea of a slice
  (no memory limit, weight 100, no quota) over what koordlet wrote, and koordlet's reconciler
  puts the pod's values back.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import paths
from tests.e2e.harness.cri import ContainerSpec
from tests.e2e.harness.koordlet import PLUGIN_ID, KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import deadline, scaled
from tests.e2e.test_koordlet import MiB, assert_batch_values_applied, be_pod

KOORDCTL = Path(sys.executable).parent / "koordctl"
UNIT = Path("/etc/systemd/system/koordlet.service")
DROP_IN = Path("/etc/systemd/system/koordlet.service.d/e2e.conf")
ENV_FILE = Path("/etc/koordlet/koordlet.env")
CONNECTED = f'plugin \\"{PLUGIN_ID}\\" connected'
RECONCILE_PASSES = "koordlet_runtime_hook_reconciler_invoked_duration_seconds_count"


def systemctl(*args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["systemctl", *args], capture_output=True, text=True, timeout=scaled(60), check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"systemctl {' '.join(args)}: {done.stderr.strip()}\n{journal()}")
    return done.stdout.strip()


def journal(lines: int = 40) -> str:
    return subprocess.run(
        ["journalctl", "-u", "koordlet", "--no-pager", "-n", str(lines)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def unit_property(name: str) -> str:
    return systemctl("show", "koordlet.service", "-p", name, "--value")


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    end = deadline(timeout)
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} not reached in {scaled(timeout):g}s; journal:\n{journal()}")


@pytest.fixture
def run_node() -> Iterator[Node]:
    """A node whose folders are under /run: the unit's PrivateTmp= hides the test's /tmp."""
    parent = Path("/run/koord-e2e")
    parent.mkdir(exist_ok=True)
    node = Node.start(parent=parent)
    yield node
    assert node.teardown() == []


@pytest.fixture
def installed(run_node: Node) -> Iterator[KoordletProcess]:
    """koordlet.service installed (not started) for ``run_node``; everything removed after.

    The returned process object only describes koordlet's flags and port: systemd runs it.
    """
    if UNIT.exists() or ENV_FILE.exists():
        pytest.fail(f"{UNIT} or {ENV_FILE} exists: not a throwaway machine, nothing touched")
    layout = run_node.containerd.layout
    flags = KoordletProcess(run_node)  # the harness's flags for this node, not started
    # Where koordlet keeps its state is left at its defaults (/var/lib/koordlet, the unit's
    # StateDirectory=): ProtectSystem=strict makes the rest of the file system read-only.
    args = list(flags.command[1:])
    for private in ("--tsdb-path", "--node-metric-file"):
        at = args.index(private)
        del args[at : at + 2]
    done = subprocess.run(
        [str(KOORDCTL), "install", "--systemd", "--no-start",
         "--containerd-config", str(layout.config),
         "--containerd-bin", str(run_node.containerd.bin_dir / "containerd"),
         f"--koordlet-args={' '.join(args)}"],
        capture_output=True, text=True, timeout=scaled(60), check=False,
    )  # fmt: skip
    try:
        assert done.returncode == 0, done.stderr
        assert f"wrote {UNIT}" in done.stdout and "enabled koordlet.service" in done.stdout
        # What this test changes against a user's install, and why: this machine's Python is
        # under /root (ProtectHome=yes hides it), a watchdog of 20 s instead of 60 s shows it
        # fed within the test, and a checkout under /tmp (koordlet's venv is in it) would be
        # hidden by PrivateTmp=yes.
        under_tmp = paths.REPO_ROOT.resolve().is_relative_to("/tmp")
        DROP_IN.parent.mkdir(exist_ok=True)
        DROP_IN.write_text(
            "[Service]\nProtectHome=read-only\nWatchdogSec=20s\n"
            + ("PrivateTmp=no\n" if under_tmp else "")
        )
        systemctl("daemon-reload")
        yield flags
    finally:
        systemctl("stop", "koordlet.service", check=False)
        systemctl("disable", "koordlet.service", check=False)
        for path in (DROP_IN, UNIT, ENV_FILE):
            path.unlink(missing_ok=True)
        DROP_IN.parent.rmdir()
        ENV_FILE.parent.rmdir()
        systemctl("daemon-reload", check=False)


def test_the_service_registers_is_watched_restarts_and_applies_batch_values(
    run_node: Node, installed: KoordletProcess
) -> None:
    node, koordlet = run_node, installed
    containerd = node.containerd
    before = containerd.log_text(since_start=True).count(CONNECTED)

    # Type=notify: `systemctl start` returns once koordlet said READY=1, after registering.
    systemctl("start", "koordlet.service")
    assert systemctl("is-active", "koordlet.service") == "active"
    assert containerd.log_text(since_start=True).count(CONNECTED) == before + 1
    assert unit_property("StatusText").startswith(f"ready: NRI plugin {PLUGIN_ID}")
    first_pid = unit_property("MainPID")

    pinged = unit_property("WatchdogTimestampMonotonic")
    wait_for(lambda: unit_property("WatchdogTimestampMonotonic") != pinged, 30, "watchdog ping")

    systemctl("kill", "-s", "KILL", "koordlet.service")
    wait_for(
        lambda: unit_property("NRestarts") == "1" and unit_property("ActiveState") == "active",
        60,
        "restart after SIGKILL",
    )
    assert unit_property("MainPID") not in ("0", first_pid)
    containerd.wait_for_log(CONNECTED, before + 2, timeout=30)

    journal = subprocess.run(
        ["journalctl", "-u", "koordlet", "--no-pager", "-o", "cat"],
        capture_output=True, text=True, timeout=scaled(30), check=False,
    ).stdout  # fmt: skip
    assert journal.count("over NRI") >= 2, journal[-3000:]  # "connected to containerd ... over NRI"

    assert_batch_values_applied(node)

    doctor = subprocess.run(
        [str(KOORDCTL), "doctor",
         "--containerd-config", str(containerd.layout.config),
         "--containerd-bin", str(containerd.bin_dir / "containerd"),
         "--addr", f"127.0.0.1:{koordlet.port}"],
        capture_output=True, text=True, timeout=scaled(120), check=False,
    )  # fmt: skip
    print("\n" + doctor.stdout)  # docs/install.md's doctor screen, for a v2 systemd node
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert not [line for line in doctor.stdout.splitlines() if line.startswith("FAIL")]
    assert "kubepods.slice (systemd driver)" in doctor.stdout
    assert "containerd runc: systemd (SystemdCgroup = true)" in doctor.stdout


def test_a_daemon_reload_resets_the_pod_slice_and_koordlet_puts_the_values_back(
    node: Node,
) -> None:
    # A reconcile interval long enough that the reset is seen before the next pass: in the
    # emulated VM a daemon-reload takes seconds, and with the default 10 s a pass fell between
    # the reload and the read five times in a row.
    with KoordletProcess(node, interval="60s") as koordlet:
        pod = be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)})
        pod_id = node.run_pod(pod)
        node.run_container(pod_id, ContainerSpec("batch"))
        assert node.pod_values(pod_id).memory_limit == 512 * MiB

        # A whole pass (level "allpods") puts pod values back; a started container's own pass
        # does not. One between the reload and the read: again.
        for _ in range(5):
            passes = koordlet.metric(RECONCILE_PASSES, level="allpods")
            systemctl("daemon-reload")
            reset = node.pod_values(pod_id)
            if koordlet.metric(RECONCILE_PASSES, level="allpods") == passes:
                break
        else:
            pytest.fail("a reconcile pass fell between every reload and its read")
        # systemd re-applied the slice unit's own properties over koordlet's values
        assert (reset.memory_limit, reset.cpu_quota) == (-1, -1)

        koordlet.wait_until(
            lambda: node.pod_values(pod_id).memory_limit == 512 * MiB,
            70,  # the next pass, at most the interval away
            "pod slice values back",
        )
        assert node.pod_values(pod_id).cpu_quota == 100000
