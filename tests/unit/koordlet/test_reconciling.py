"""The reconciler's passes over a fake cgroup tree and /proc: per-process values are written
to the processes a container's cgroup holds, and what was given to a container is forgotten
once the container is gone (whether /metrics is ever scraped or not)."""

from __future__ import annotations

from pathlib import Path

from koordapi import features, keys
from koordapi.features import FeatureGates
from koordapi.nodeslo import NodeSLOSpec
from koordapi.qos import KubeQoS
from koordlet.applying import Applier
from koordlet.executor import Executor
from koordlet.executor.resctrl import Resctrl
from koordlet.metrics import KoordletMetrics
from koordlet.reconciling import Reconciler
from koordlet.states.pods import PodStore
from runtimehooks import HOOKS
from runtimehooks.patch import PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import Stage
from runtimehooks.rules import KernelFeatures, NodeState, Rules
from tests.unit.koordlet.nri.test_hooks import POD_DIR, be_pod, cgroup_tree, container

PIDS = {"c-main": 4242, "c-side": 4243}


def node(tmp_path: Path) -> tuple[PodStore, Applier, Reconciler, Path]:
    """A BE pod with two running containers, one process each, oom_score_adj 0."""
    root = cgroup_tree(tmp_path / "cgroup")
    proc = tmp_path / "proc"
    pod = be_pod()
    pod.annotations[keys.ANNOTATION_OOM_SCORE_ADJ] = "937"
    pods = PodStore()
    pods.put_pod(pod)
    for name in ("main", "side"):
        ctr = container(name)
        pods.put_container(pod, ctr)
        for sub in ("cpu", "memory"):
            (root / sub / POD_DIR / ctr.id).mkdir()
        (root / "cpu" / POD_DIR / ctr.id / "cgroup.procs").write_text(f"{PIDS[ctr.id]}\n")
        (proc / str(PIDS[ctr.id])).mkdir(parents=True)
        (proc / str(PIDS[ctr.id]) / "oom_score_adj").write_text("0\n")
    applier = Applier(Executor(root), Resctrl(tmp_path / "resctrl"), proc_root=proc)
    rules = Rules(
        node=NodeState(cpus=frozenset({0, 1})),
        kernel=KernelFeatures(cpu_idle=True),
        gates=FeatureGates.parse(f"{features.OOM_SCORE_ADJ}=true"),
    )
    reconciler = Reconciler(
        hooks=HOOKS,
        rules=lambda: rules,
        pods=pods,
        applier=applier,
        metrics=KoordletMetrics("n1"),
        interval=10,
    )
    return pods, applier, reconciler, proc


def test_a_pass_sets_each_process_and_remembers_it_per_container(tmp_path: Path) -> None:
    _, applier, reconciler, proc = node(tmp_path)
    reconciler.reconcile_all()
    for pid in PIDS.values():
        assert (proc / str(pid) / "oom_score_adj").read_text().strip() == "937"
    assert applier.oom_scores == {("u1", "c-main"): 937, ("u1", "c-side"): 937}


def test_what_was_given_to_a_gone_container_or_pod_is_forgotten_at_the_next_pass(
    tmp_path: Path,
) -> None:
    pods, applier, reconciler, _ = node(tmp_path)
    reconciler.reconcile_all()
    pods.remove_container("p1", "c-side")
    reconciler.reconcile_all()
    assert applier.oom_scores == {("u1", "c-main"): 937}
    pods.remove_pod("p1")
    reconciler.reconcile_all()
    assert applier.oom_scores == {}


def test_the_kube_qos_dirs_written_are_below_the_cgroup_kube_dir(tmp_path: Path) -> None:
    """Group identity on a cpu.idle kernel idles the besteffort QoS dir of the kubelet that
    --cgroup-kube-dir names; another tree's /kubepods is left alone."""
    root = tmp_path / "cgroup"
    for top in ("kubepods", "koordk8s/kubepods"):
        for qos in ("burstable", "besteffort"):
            (root / "cpu" / top / qos).mkdir(parents=True)
            (root / "cpu" / top / qos / "cpu.idle").write_text("0\n")
    slo = NodeSLOSpec.parse({"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}}})
    rules = Rules(slo=slo, gates=FeatureGates(), kernel=KernelFeatures(cpu_idle=True))
    reconciler = Reconciler(
        hooks=HOOKS,
        rules=lambda: rules,
        pods=PodStore("cgroupfs", root, "/koordk8s/kubepods/"),
        applier=Applier(Executor(root), Resctrl(tmp_path / "resctrl"), proc_root=tmp_path),
        metrics=KoordletMetrics("n1"),
        interval=10,
    )
    reconciler.reconcile_kube_qos(rules)
    idle = {
        path.parent.relative_to(root / "cpu").as_posix(): path.read_text().strip()
        for path in sorted((root / "cpu").rglob("cpu.idle"))
    }
    assert idle == {
        "koordk8s/kubepods/besteffort": "1",
        "koordk8s/kubepods/burstable": "0",
        "kubepods/besteffort": "0",
        "kubepods/burstable": "0",
    }


def test_the_kube_qos_writes_come_from_the_hooks_kube_qos_stage(tmp_path: Path) -> None:
    """Not a fixed list: a hook registered for the stage has its values written, on the
    kernel's files only (no cpu.bvt_warp_ns here: nothing written there)."""
    root = tmp_path / "cgroup"
    for qos in ("", "/burstable", "/besteffort"):
        (root / "cpu" / f"kubepods{qos}").mkdir(parents=True, exist_ok=True)
        (root / "cpu" / f"kubepods{qos}" / "cpu.shares").write_text("1024\n")
    shares = {KubeQoS.GUARANTEED: 3113, KubeQoS.BURSTABLE: 1187, KubeQoS.BESTEFFORT: 6}

    def kube_shares(kube: KubeQoS, rules: Rules, stage: Stage) -> PodPatch | None:
        return PodPatch(cpu_shares=shares[kube], cpu_bvt_warp_ns=-1)

    hook = Hook(
        "KubeShares", features.BATCH_RESOURCE, frozenset({Stage.RECONCILE_KUBE_QOS}),
        kube_qos=kube_shares,
    )  # fmt: skip
    rules = Rules(gates=FeatureGates(), kernel=KernelFeatures())
    reconciler = Reconciler(
        hooks=[hook],
        rules=lambda: rules,
        pods=PodStore("cgroupfs", root),
        applier=Applier(Executor(root), Resctrl(tmp_path / "resctrl"), proc_root=tmp_path),
        metrics=KoordletMetrics("n1"),
        interval=10,
    )
    reconciler.reconcile_kube_qos(rules)
    written = {
        path.parent.relative_to(root / "cpu").as_posix(): path.read_text().strip()
        for path in sorted((root / "cpu").rglob("cpu.*"))
    }
    assert written == {
        "kubepods": "3113",
        "kubepods/besteffort": "6",
        "kubepods/burstable": "1187",
    }
