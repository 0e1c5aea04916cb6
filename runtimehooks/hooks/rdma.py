"""RDMA device inject: give the container the RDMA devices the scheduler allocated.

For each ``rdma`` entry of ``scheduling.koordinator.sh/device-allocated`` (a PF's PCI address, or
its VFs' bus ids) the container gets that function's ``/dev/infiniband/uverbsN``, plus
``/dev/infiniband/rdma_cm``. Which uverbs device belongs to which PCI function, and its device
numbers, koordlet reads from sysfs into the node state; an address this node does not have is
an error.
"""

from __future__ import annotations

from koordapi import annotation, features, keys
from koordapi.errors import AnnotationError
from runtimehooks.patch import ContainerPatch, Device
from runtimehooks.registry import Hook
from runtimehooks.request import ContainerRequest, Stage
from runtimehooks.rules import Rules


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    text = req.pod.annotations.get(keys.ANNOTATION_DEVICE_ALLOCATED)
    if text is None:
        return None
    entries = annotation.parse_device_allocated(text).get("rdma", ())
    if not entries:
        return None
    devices: list[Device] = [] if rules.node.rdma_cm is None else [rules.node.rdma_cm]
    for entry in entries:
        for address in entry.vf_bus_ids or (entry.pci_id,):
            found = rules.node.rdma_verbs.get(address)
            if found is None:
                raise AnnotationError(
                    keys.ANNOTATION_DEVICE_ALLOCATED,
                    f"RDMA function {address!r} is not on this node",
                )
            devices.extend(found)
    return ContainerPatch(devices=tuple(dict.fromkeys(devices)))


HOOK = Hook(
    name="rdma device inject",
    gate=features.RDMA_DEVICE_INJECT,
    stages=frozenset({Stage.PRE_CREATE_CONTAINER}),
    container=container,
)
