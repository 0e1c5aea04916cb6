"""``koordctl doctor``: is this node ready for koordlet? One line per check, with the fix.

Each check is a function of a ``DoctorConfig`` returning one ``Check`` (OK, WARN or FAIL, what
it found, and for WARN and FAIL the remedy). Every file is read under the config's roots, so
tests point the checks at a fake tree. FAIL means koordlet cannot do its job here (no NRI, a
socket nobody serves, a cgroup driver mismatch); WARN means an optional kernel feature or
device is missing and says which koordlet feature goes without it.

Checks only look. The two exceptions touch nothing lasting: a connect to the NRI socket that
is closed before a byte is sent (containerd logs it as "failed to start external plugin ...
connection closed" and carries on), and one hardware counter opened and closed on this process.
The answers come from the same code koordlet runs: containerd's config from
``koordlet.install.containerd``, kernel features from ``states.topology.detect_kernel``, perf
counters from the CPI collector's probe, GPUs and RDMA devices from their collectors. No check
raises: an unexpected error becomes that check's line.

Usage::

    checks = run_checks(DoctorConfig(containerd_bin="/usr/bin/containerd"))
    print(render(checks))
    sys.exit(exit_status(checks))
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from koordlet.cgroupfs.hierarchy import detect_version, v2_root
from koordlet.collectors import cpi, gpu
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.rdma import rdma_devices
from koordlet.executor import coresched
from koordlet.executor.resctrl import Resctrl
from koordlet.inspect.program import missing_prerequisite
from koordlet.install import containerd
from koordlet.states.pods import DEFAULT_KUBE_DIR, drivers_in_tree, parse_kube_dir
from koordlet.states.topology import detect_kernel

NRI_TABLE = f'[plugins."{containerd.NRI_SECTION}"]'
RUNC_OPTIONS_TABLE = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]'
RDT_FLAGS = ("rdt_a", "cat_l3", "mba")
_PREINSTALLED = re.compile(r"^\d\d-.+")


class Status(enum.StrEnum):
    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it went, what was found, how to fix it."""

    name: str
    status: Status
    finding: str
    fix: str = ""


def bcc_import_error() -> str | None:
    """Why ``import bcc`` fails in a fresh interpreter (as koordlet's BPF loader runs it), or
    None. A child process: bcc loads LLVM, which this command need not carry."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import bcc"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"cannot run {sys.executable}: {err}"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


@dataclass(frozen=True)
class DoctorConfig:
    """Where the checks look. Defaults are the real node's paths; tests pass fake roots."""

    proc_root: Path = Path("/proc")
    sys_root: Path = Path("/sys")
    cgroup_root: Path = Path("/sys/fs/cgroup")
    cgroup_kube_dir: str = DEFAULT_KUBE_DIR  # koordlet's --cgroup-kube-dir
    containerd_config: Path = containerd.DEFAULT_CONFIG
    containerd_bin: str = "containerd"
    nri_socket: Path | None = None  # None: the socket_path of containerd's config
    addr: str = "127.0.0.1:9316"  # koordlet's status server (koordctl's DEFAULT_ADDR)
    modules_root: Path = Path("/lib/modules")  # kernel headers, for bcc
    timeout: float = 2.0  # seconds, for the socket connect and the HTTP request
    # Probes that are not files; tests replace them.
    perf_open: cpi.PerfOpen = cpi.perf_event_open
    load_nvml: Callable[[], gpu.NVML] = gpu.load_nvml
    import_bcc: Callable[[], str | None] = bcc_import_error
    euid: Callable[[], int] = os.geteuid


# -- containerd and NRI ---------------------------------------------------------------------


def _version_text(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)


def _koordlet_plugins(plugin_path: str) -> list[str]:
    """Pre-installed NRI plugins (``NN-name`` in containerd's plugin_path) that are koordlet."""
    try:
        entries = sorted(Path(plugin_path).iterdir())
    except OSError:
        return []
    return [e.name for e in entries if _PREINSTALLED.match(e.name) and "koordlet" in e.name]


def check_containerd(config: DoctorConfig) -> Check:
    """containerd's version (NRI needs 1.7) and whether its config lets koordlet connect."""
    name = "containerd"
    path = config.containerd_config
    version = containerd.containerd_version(config.containerd_bin)
    if version is None:
        return Check(
            name,
            Status.FAIL,
            f"cannot run `{config.containerd_bin} --version`",
            "install containerd 1.7 or later, or pass --containerd-bin PATH",
        )
    text = _version_text(version)
    if version < (1, 7, 0):
        return Check(
            name,
            Status.FAIL,
            f"{text} has no NRI (it arrived in containerd 1.7)",
            "upgrade containerd to 1.7 or later (Debian 13 ships 1.7.24)",
        )
    try:
        nri = containerd.read_nri_settings(path, version[0])
    except containerd.ContainerdConfigError as err:
        return Check(
            name,
            Status.FAIL,
            f"{text}, config unusable: {err}",
            f"repair {path}: containerd cannot load it either",
        )
    if not nri.enabled:
        why = (
            f"disable = true in {NRI_TABLE}"
            if nri.explicit
            else f"no {NRI_TABLE} section, and containerd {version[0]}.x defaults to off"
        )
        where = path if nri.files else f"{path} (missing)"
        return Check(
            name,
            Status.FAIL,
            f"{text}, NRI disabled: {why}",
            f"add to {where}: {NRI_TABLE} with disable = false and disable_connections = "
            "false (or run `koordctl install --systemd`, which writes a drop-in), then restart "
            "containerd",
        )
    if nri.disable_connections:
        preinstalled = _koordlet_plugins(nri.plugin_path)
        if preinstalled:
            return Check(
                name,
                Status.WARN,
                f"{text}, NRI enabled, connections disabled; koordlet runs as the pre-installed "
                f"plugin {', '.join(preinstalled)} in {nri.plugin_path}",
                f"none needed for koordlet; set disable_connections = false in {NRI_TABLE} of "
                f"{path} if external plugins (koordctl nri-events) must connect",
            )
        return Check(
            name,
            Status.FAIL,
            f"{text}, NRI enabled but disable_connections = true: containerd opens no socket, "
            "so koordlet (an external plugin) is silently kept out (Koordinator #1993)",
            f"set disable_connections = false in {NRI_TABLE} of {path} and restart containerd, "
            f"or install koordlet as a pre-installed plugin (00-koordlet) in {nri.plugin_path}",
        )
    return Check(
        name,
        Status.OK,
        f"{text}, NRI enabled, connections allowed (socket {nri.socket_path})",
    )


def check_nri_socket(config: DoctorConfig) -> Check:
    """The NRI socket exists and something accepts connections on it (nothing is sent)."""
    name = "nri-socket"
    note = ""
    if config.nri_socket is not None:
        path = config.nri_socket
    else:
        try:
            path = Path(containerd.read_nri_settings(config.containerd_config).socket_path)
        except containerd.ContainerdConfigError:
            path = Path(containerd.DEFAULT_SOCKET)
            note = " (the default: containerd's config is unusable)"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return Check(
            name,
            Status.FAIL,
            f"no socket at {path}{note}",
            "containerd creates it at start when NRI is enabled with connections allowed: "
            "fix the containerd check, then restart containerd",
        )
    if not stat.S_ISSOCK(mode):
        return Check(
            name,
            Status.FAIL,
            f"{path} is not a socket",
            f"remove {path} and restart containerd, which creates the socket",
        )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(config.timeout)
        try:
            sock.connect(str(path))
        except ConnectionRefusedError:
            return Check(
                name,
                Status.FAIL,
                f"{path} exists but nobody listens on it (containerd not running, or a stale "
                "socket)",
                "start containerd (systemctl restart containerd); it recreates the socket",
            )
        except PermissionError as err:
            return Check(
                name,
                Status.FAIL,
                f"cannot connect to {path}: {err.strerror}",
                "run koordctl doctor (and koordlet) as root",
            )
        except TimeoutError:
            return Check(
                name,
                Status.FAIL,
                f"connect to {path} timed out after {config.timeout:g}s",
                "containerd does not accept connections: check `journalctl -u containerd`",
            )
        except OSError as err:
            return Check(
                name,
                Status.FAIL,
                f"cannot connect to {path}: {err.strerror or err}",
                "check the socket path (--nri-socket) and containerd's log",
            )
    return Check(name, Status.OK, f"{path} accepts connections")


def nri_connected(metrics_text: str) -> float | None:
    """The largest ``koordlet_nri_connected`` sample in a /metrics scrape, None without one."""
    values = [
        sample.value
        for family in text_string_to_metric_families(metrics_text)
        if family.name == "koordlet_nri_connected"
        for sample in family.samples
    ]
    return max(values) if values else None


def flagged(metrics_text: str, family_name: str, label: str) -> list[str]:
    """The ``label`` values of the samples of ``family_name`` that are 1 (koordlet's way of
    listing things: a gauge per item)."""
    return sorted(
        sample.labels.get(label, "?")
        for family in text_string_to_metric_families(metrics_text)
        if family.name == family_name
        for sample in family.samples
        if sample.value >= 1
    )


def unimplemented_gates(metrics_text: str) -> list[str]:
    """The gates koordlet says were turned on but change nothing."""
    return flagged(metrics_text, "koordlet_feature_gate_unimplemented", "gate")


def unimplemented_flags(metrics_text: str) -> list[str]:
    """Koordinator's flags koordlet was given that change nothing here."""
    return flagged(metrics_text, "koordlet_flag_unimplemented", "flag")


def unsupported_slo_fields(metrics_text: str) -> list[str]:
    """The NodeSLO fields koordlet says are set but not used here."""
    return flagged(metrics_text, "koordlet_node_slo_unsupported_field", "field")


def nri_conflicts(metrics_text: str) -> dict[str, float]:
    """``koordlet_nri_conflicts_total`` by resource in a /metrics scrape ({} without it)."""
    return {
        sample.labels.get("resource", "?"): sample.value
        for family in text_string_to_metric_families(metrics_text)
        if family.name == "koordlet_nri_conflicts"
        for sample in family.samples
        if sample.name == "koordlet_nri_conflicts_total"
    }


def scrape_koordlet(config: DoctorConfig) -> str:
    """koordlet's /metrics text. Raises urllib's HTTPError, or OSError or ValueError when
    nothing answers there."""
    url = f"http://{config.addr}/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy for a node
    with opener.open(url, timeout=config.timeout) as response:
        return str(response.read().decode(errors="replace"))


def check_koordlet(config: DoctorConfig) -> Check:
    """koordlet answers on its status server and is registered with the runtime over NRI."""
    name = "koordlet"
    url = f"http://{config.addr}/metrics"
    try:
        text = scrape_koordlet(config)
    except urllib.error.HTTPError as err:
        err.close()  # its unread body holds the connection's socket open
        return Check(
            name,
            Status.FAIL,
            f"{url} answered HTTP {err.code}",
            "check koordlet's log; is another service on that address?",
        )
    except (OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return Check(
            name,
            Status.WARN,
            f"not reachable at {config.addr} ({reason}); it may not be running yet",
            "start koordlet (systemctl start koordlet), or pass its address with --addr",
        )
    try:
        value = nri_connected(text)
    except ValueError as err:
        return Check(
            name,
            Status.FAIL,
            f"{url} is not a Prometheus scrape: {err}",
            f"is koordlet the service on {config.addr}? pass its address with --addr",
        )
    fix = (
        "koordlet retries by itself once containerd's NRI socket accepts connections: fix the "
        "containerd and nri-socket checks, and see koordlet's log"
    )
    if value is None:
        return Check(
            name,
            Status.FAIL,
            f"running at {config.addr} but never registered over NRI (no "
            "koordlet_nri_connected sample; also the case with --enable-nri-runtime-hook=false)",
            fix,
        )
    if value < 1:
        return Check(
            name,
            Status.FAIL,
            f"running at {config.addr} but not registered: its NRI connection closed "
            "(koordlet_nri_connected 0)",
            fix,
        )
    idle = unimplemented_gates(text)
    idle_flags = unimplemented_flags(text)
    unused = unsupported_slo_fields(text)
    findings, fixes = [], []
    if idle:
        findings.append(
            f"feature gates on that are not implemented and change nothing: {', '.join(idle)}"
        )
        fixes.append(
            "turn them off with --feature-gates (NAME=false), or expect nothing from them "
            "(see koordlet --help)"
        )
    if idle_flags:
        findings.append(
            "flags given that change nothing here: " + ", ".join(f"--{f}" for f in idle_flags)
        )
        fixes.append("drop them, or expect nothing from them (koordlet --help says why)")
    if unused:
        findings.append(f"NodeSLO fields set that are not used here: {', '.join(unused)}")
        fixes.append(
            "remove them from the NodeSLO (in a cluster: from slo-controller-config), or "
            "expect nothing from them; koordlet's log says why for each"
        )
    if findings:
        return Check(
            name,
            Status.WARN,
            f"running at {config.addr}, registered over NRI; {'; '.join(findings)}",
            "; ".join(fixes),
        )
    return Check(name, Status.OK, f"running at {config.addr}, registered over NRI")


def check_nri_conflicts(config: DoctorConfig) -> Check:
    """No value koordlet asked over NRI was found changed in a started container's cgroup
    (its ``koordlet_nri_conflicts_total``, Koordinator issue #2334)."""
    name = "nri-conflicts"
    try:
        text = scrape_koordlet(config)
        counts = nri_conflicts(text)
    except (OSError, ValueError):  # not reachable, or not koordlet: the koordlet check says so
        return Check(name, Status.OK, "not checked: no koordlet scrape (see the koordlet check)")
    found = {resource: count for resource, count in sorted(counts.items()) if count > 0}
    if not found:
        return Check(
            name, Status.OK, "no container's cgroup differed from what koordlet asked over NRI"
        )
    listed = ", ".join(f"{resource} {count:g}" for resource, count in found.items())
    total = sum(found.values())
    values = (
        "value koordlet asked over NRI was" if total == 1 else "values koordlet asked over NRI were"
    )
    return Check(
        name,
        Status.WARN,
        f"{total:g} {values} changed by another NRI plugin or the kubelet by the time its "
        f"container started: {listed} (koordlet_nri_conflicts_total)",
        "koordlet's log names each container with both values (`koordctl explain POD` too): "
        "let one NRI plugin own each resource (disable it in the other plugin, or narrow that "
        "plugin to other pods), and check the kubelet's CPU manager policy for cpusets",
    )


# -- cgroups --------------------------------------------------------------------------------


def cgroup_layout(root: Path) -> tuple[str, Path | None] | None:
    """("v2", root), ("hybrid", the v2 tree), ("v1", None), or None without a hierarchy."""
    if detect_version(root) == 2:
        return "v2", root
    unified = v2_root(root)
    if (root / "cpu").is_dir():
        return ("hybrid", unified) if unified is not None else ("v1", None)
    return None


def kubepods_driver(root: Path, version: str, kube_dir: str = DEFAULT_KUBE_DIR) -> str | None:
    """The kubelet's cgroup driver by its top cgroup (cgroupfs: ``kube_dir``): systemd,
    cgroupfs, both, or None."""
    found = drivers_in_tree(root if version == "v2" else root / "cpu", kube_dir)
    return "both" if len(found) == 2 else next(iter(found), None)


def check_cgroup(config: DoctorConfig) -> Check:
    """cgroup v1, v2 or hybrid; the kubepods layout against containerd's SystemdCgroup."""
    name = "cgroup"
    root = config.cgroup_root
    layout = cgroup_layout(root)
    if layout is None:
        return Check(
            name,
            Status.FAIL,
            f"no cgroup hierarchy at {root} (neither cgroup.controllers nor a cpu/ controller)",
            "pass the cgroup mount point with --cgroup-root-dir",
        )
    version, tree = layout
    parts = [
        {
            "v2": f"v2 (unified at {root})",
            "hybrid": f"hybrid (v1 controllers, v2 tree at {tree})",
            "v1": "v1 (no v2 tree)",
        }[version]
    ]
    driver = kubepods_driver(root, version, config.cgroup_kube_dir)
    kube_dir = parse_kube_dir(config.cgroup_kube_dir)
    try:
        runc_systemd: bool | None = containerd.read_systemd_cgroup(config.containerd_config)
    except containerd.ContainerdConfigError:
        runc_systemd = None  # the containerd check reports it
    runc_driver = None if runc_systemd is None else ("systemd" if runc_systemd else "cgroupfs")
    parts.append(
        {
            None: "no kubepods yet",
            "systemd": "kubepods.slice (systemd driver)",
            "cgroupfs": f"{kube_dir}/ (cgroupfs driver)",
            "both": f"both kubepods.slice and {kube_dir}/",
        }[driver]
    )
    if runc_driver is not None:
        toml_bool = "true" if runc_systemd else "false"
        parts.append(f"containerd runc: {runc_driver} (SystemdCgroup = {toml_bool})")
    finding = ", ".join(parts)
    if driver == "both":
        return Check(
            name,
            Status.WARN,
            finding,
            "the kubelet's cgroup driver changed: drain the node and remove the stale tree",
        )
    if driver is not None and runc_driver is not None and driver != runc_driver:
        want = "true" if driver == "systemd" else "false"
        return Check(
            name,
            Status.FAIL,
            finding + ": the kubelet and containerd disagree",
            f"set SystemdCgroup = {want} in {RUNC_OPTIONS_TABLE} of {config.containerd_config} "
            "(or change the kubelet's cgroupDriver to match), then restart containerd",
        )
    return Check(name, Status.OK, finding)


# -- kernel features ------------------------------------------------------------------------


def _cpu_root(cgroup_root: Path) -> Path:
    return cgroup_root if detect_version(cgroup_root) == 2 else cgroup_root / "cpu"


def _has_file(root: Path, name: str) -> bool:
    """``name`` in ``root`` or one of its child cgroups (a v2 root has no cpu.* files)."""
    if (root / name).exists():
        return True
    try:
        return any((child / name).exists() for child in root.iterdir() if child.is_dir())
    except OSError:
        return False


def check_group_identity(config: DoctorConfig) -> Check:
    try:  # the kernel of the node whose /proc this is
        release = (config.proc_root / "sys" / "kernel" / "osrelease").read_text().strip()
    except OSError:
        release = ""
    resctrl = Resctrl(config.sys_root / "fs" / "resctrl")
    mechanism = detect_kernel(config.cgroup_root, resctrl, release).group_identity_mechanism
    if mechanism == "bvt":
        return Check("group-identity", Status.OK, "cpu.bvt_warp_ns (Anolis group identity)")
    if mechanism == "cpu.idle":
        return Check("group-identity", Status.OK, "cpu.idle (SCHED_IDLE cgroups)")
    return Check(
        "group-identity",
        Status.WARN,
        "no cpu.bvt_warp_ns or cpu.idle: GroupIdentity has no effect, BE pods compete with LS "
        "pods at normal priority",
        "a Linux 5.15+ kernel (cpu.idle) or an Anolis kernel (cpu.bvt_warp_ns)",
    )


def check_cfs_burst(config: DoctorConfig) -> Check:
    v2 = detect_version(config.cgroup_root) == 2
    file = "cpu.max.burst" if v2 else "cpu.cfs_burst_us"
    if _has_file(_cpu_root(config.cgroup_root), file):
        return Check("cfs-burst", Status.OK, file)
    return Check(
        "cfs-burst",
        Status.WARN,
        f"no {file}: CPUBurst's cpuBurst policy cannot let pods run past their quota",
        "a Linux 5.14+ kernel with CONFIG_CFS_BANDWIDTH",
    )


def check_core_sched(config: DoctorConfig) -> Check:
    if coresched.supported():
        return Check("core-sched", Status.OK, "prctl(PR_SCHED_CORE) works")
    return Check(
        "core-sched",
        Status.WARN,
        "no core scheduling: the CoreSched gate has no effect (BE and LS pods may share a "
        "core's hyper-threads)",
        "a kernel built with CONFIG_SCHED_CORE (Linux 5.14+)",
    )


def _cpu_flags(proc_root: Path) -> set[str]:
    for line in (proc_root / "cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def check_resctrl(config: DoctorConfig) -> Check:
    name = "resctrl"
    resctrl_dir = config.sys_root / "fs" / "resctrl"
    flags = sorted(_cpu_flags(config.proc_root) & set(RDT_FLAGS))
    flag_text = " ".join(flags) if flags else "none of " + ", ".join(RDT_FLAGS)
    if Resctrl(resctrl_dir).available:
        return Check(name, Status.OK, f"mounted at {resctrl_dir}; CPU flags: {flag_text}")
    cost = "the Resctrl gate (LLC and memory bandwidth isolation) has no effect"
    if not flags:
        return Check(
            name,
            Status.WARN,
            f"the CPU has no RDT ({flag_text} in {config.proc_root / 'cpuinfo'}): {cost}",
            "none on this hardware: needs Intel RDT or AMD PQoS",
        )
    try:
        filesystems = (config.proc_root / "filesystems").read_text().split()
    except OSError:
        filesystems = []
    if "resctrl" not in filesystems:
        return Check(
            name,
            Status.WARN,
            f"the CPU has {flag_text} but the kernel has no resctrl filesystem: {cost}",
            "a kernel built with CONFIG_X86_CPU_RESCTRL",
        )
    return Check(
        name,
        Status.WARN,
        f"not mounted at {resctrl_dir} (the CPU has {flag_text}): {cost}",
        f"mount -t resctrl resctrl {resctrl_dir}",
    )


def check_psi(config: DoctorConfig) -> Check:
    path = config.proc_root / "pressure" / "cpu"
    try:
        path.read_text()
    except OSError as err:
        return Check(
            "psi",
            Status.WARN,
            f"PSI is off ({path}: {err.strerror or err}): PSICollector has nothing to read and "
            "pressure columns stay empty",
            "boot with psi=1 on the kernel command line (needs CONFIG_PSI)",
        )
    return Check("psi", Status.OK, f"{path} readable")


def check_btf(config: DoctorConfig) -> Check:
    path = config.sys_root / "kernel" / "btf" / "vmlinux"
    if path.exists():
        return Check("btf", Status.OK, str(path))
    return Check(
        "btf",
        Status.WARN,
        f"no {path}: no kernel type information for CO-RE BPF programs (bcc still works from "
        "kernel headers)",
        "a kernel built with CONFIG_DEBUG_INFO_BTF",
    )


def _tracefs_places(sys_root: Path) -> tuple[Path, ...]:
    return (sys_root / "kernel" / "tracing", sys_root / "kernel" / "debug" / "tracing")


def check_bcc(config: DoctorConfig) -> Check:
    """bcc imports, and the rest koordlet's BPF loader needs (root, tracefs, headers)."""
    cost = "SchedLatencyCollector and koordctl inspect have no run-queue latency"
    error = config.import_bcc()
    if error is not None:
        return Check(
            "bcc",
            Status.WARN,
            f"bcc is not installed ({error}): {cost}",
            "Debian: apt install python3-bpfcc (importable from koordlet's Python)",
        )
    problem = missing_prerequisite(
        _tracefs_places(config.sys_root), config.modules_root, config.euid
    )
    if problem is not None:
        return Check(
            "bcc", Status.WARN, f"bcc imports, but the program cannot load: {cost}", problem
        )
    return Check("bcc", Status.OK, "importable; root, tracefs and kernel headers present")


def check_tracefs(config: DoctorConfig) -> Check:
    for place in _tracefs_places(config.sys_root):
        if (place / "events" / "sched").is_dir():
            return Check("tracefs", Status.OK, f"{place} (sched events)")
    return Check(
        "tracefs",
        Status.WARN,
        f"tracefs is not mounted at {_tracefs_places(config.sys_root)[0]}: the run-queue "
        "latency program has no sched tracepoints",
        "mount -t tracefs tracefs /sys/kernel/tracing",
    )


def check_perf(config: DoctorConfig) -> Check:
    path = config.proc_root / "sys" / "kernel" / "perf_event_paranoid"
    try:
        paranoid = f"perf_event_paranoid={path.read_text().strip()}"
    except FileNotFoundError:
        return Check(
            "perf",
            Status.WARN,
            f"no {path}: the kernel has no perf events, CPICollector has no data",
            "a kernel built with CONFIG_PERF_EVENTS",
        )
    probe = cpi.CPICollector(
        lambda: (), config.cgroup_root, config.sys_root, perf_open=config.perf_open
    )
    try:
        probe._probe()  # the collector's own check: one cycles counter on this process
    except CollectorUnavailable as err:
        return Check(
            "perf",
            Status.WARN,
            f"{paranoid}; {err}: CPICollector has no data",
            "run koordlet as root (CAP_PERFMON) or lower kernel.perf_event_paranoid"
            if "not permitted" in str(err)
            else "none: this machine exposes no hardware counters (most VMs do not)",
        )
    except OSError as err:
        return Check(
            "perf",
            Status.WARN,
            f"{paranoid}; a cycles counter does not open: {err.strerror or err}",
            "check the kernel's perf support (perf stat -e cycles true)",
        )
    return Check("perf", Status.OK, f"{paranoid}; a hardware cycles counter opens")


# -- devices --------------------------------------------------------------------------------


def check_gpu(config: DoctorConfig) -> Check:
    """NVIDIA GPUs through NVML; none is normal on a CPU node."""
    driver = (config.sys_root / "module" / "nvidia").exists()
    try:
        devices = gpu.gpu_inventory(config.load_nvml())
    except CollectorUnavailable as err:
        if driver:
            install = str(err) == gpu.INSTALL_HINT
            return Check(
                "gpu",
                Status.WARN,
                f"the NVIDIA driver is loaded but {err}: no GPU metrics or GPU env injection",
                gpu.INSTALL_HINT.partition(": ")[2] if install else "check it with nvidia-smi",
            )
        reason = "pynvml not installed" if str(err) == gpu.INSTALL_HINT else str(err)
        return Check("gpu", Status.OK, f"no GPUs (no NVIDIA driver loaded; {reason})")
    if not devices:
        return Check("gpu", Status.OK, "no GPUs (NVML reports none)")
    names = ", ".join(f"{d.index}: {d.name}" for d in devices)
    return Check("gpu", Status.OK, f"{len(devices)} GPU(s): {names}")


def check_rdma(config: DoctorConfig) -> Check:
    devices = rdma_devices(config.sys_root)
    if not devices:
        return Check("rdma", Status.OK, "no RDMA devices")
    described = ", ".join(
        f"{d.name} ({'/'.join(p.state for p in d.ports) or 'no ports'})" for d in devices
    )
    without_verbs = [d.name for d in devices if d.uverbs is None]
    if without_verbs:
        return Check(
            "rdma",
            Status.WARN,
            f"{described}; no user verbs device for {', '.join(without_verbs)}: "
            "RDMADeviceInject cannot give them to containers",
            "modprobe ib_uverbs",
        )
    return Check("rdma", Status.OK, described)


# -- running and rendering ------------------------------------------------------------------

CheckFn = Callable[[DoctorConfig], Check]

# (name, check, the status of an error the check did not expect): a missing essential is a
# FAIL, a missing optional feature a WARN.
CHECKS: tuple[tuple[str, CheckFn, Status], ...] = (
    ("containerd", check_containerd, Status.FAIL),
    ("nri-socket", check_nri_socket, Status.FAIL),
    ("koordlet", check_koordlet, Status.WARN),
    ("nri-conflicts", check_nri_conflicts, Status.WARN),
    ("cgroup", check_cgroup, Status.FAIL),
    ("group-identity", check_group_identity, Status.WARN),
    ("cfs-burst", check_cfs_burst, Status.WARN),
    ("core-sched", check_core_sched, Status.WARN),
    ("resctrl", check_resctrl, Status.WARN),
    ("psi", check_psi, Status.WARN),
    ("btf", check_btf, Status.WARN),
    ("bcc", check_bcc, Status.WARN),
    ("tracefs", check_tracefs, Status.WARN),
    ("perf", check_perf, Status.WARN),
    ("gpu", check_gpu, Status.WARN),
    ("rdma", check_rdma, Status.WARN),
)


def run_checks(
    config: DoctorConfig, checks: tuple[tuple[str, CheckFn, Status], ...] = CHECKS
) -> list[Check]:
    """Every check in order; one that raises becomes a line with the error, never a crash."""
    results = []
    for name, fn, on_error in checks:
        try:
            results.append(fn(config))
        except Exception as err:  # a check's surprise is its own line, not the end of the report
            fix = (
                "rerun as root"
                if isinstance(err, PermissionError)
                else "see the error; the other checks are unaffected"
            )
            results.append(
                Check(name, on_error, f"could not check: {type(err).__name__}: {err}", fix)
            )
    return results


NAME_WIDTH = 18


def render(checks: list[Check]) -> str:
    """One aligned line per check; WARN and FAIL add an indented ``fix:`` line; a total."""
    lines = []
    for check in checks:
        lines.append(f"{check.status.value:6}{check.name:{NAME_WIDTH}}{check.finding}")
        if check.status is not Status.OK and check.fix:
            lines.append(f"{'':6}fix: {check.fix}")
    counts = {s: sum(c.status is s for c in checks) for s in Status}
    lines.append(
        f"{counts[Status.FAIL]} failed, {counts[Status.WARN]} warnings, {counts[Status.OK]} ok"
    )
    return "\n".join(lines)


def to_json(checks: list[Check]) -> dict[str, Any]:
    return {
        "checks": [{**asdict(c), "status": c.status.value} for c in checks],
        "ok": exit_status(checks) == 0,
    }


def exit_status(checks: list[Check]) -> int:
    """1 when any check failed, else 0 (warnings do not fail)."""
    return 1 if any(c.status is Status.FAIL for c in checks) else 0


def run(args: argparse.Namespace) -> int:
    """Check the node for koordlet; 1 when any check fails."""
    config = DoctorConfig(
        proc_root=Path(args.proc_root_dir),
        sys_root=Path(args.sys_root_dir),
        cgroup_root=Path(args.cgroup_root_dir),
        cgroup_kube_dir=args.cgroup_kube_dir,
        containerd_config=Path(args.containerd_config),
        containerd_bin=args.containerd_bin,
        nri_socket=Path(args.nri_socket) if args.nri_socket else None,
        addr=args.addr,
    )
    results = run_checks(config)
    print(json.dumps(to_json(results)) if args.json else render(results))
    return exit_status(results)
