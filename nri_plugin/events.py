"""NRI events, the plugin methods that handle them, and subscription masks.

One table links each NRI event to the snake_case plugin method that handles it (the NRI name,
so grep works across the Go upstream) and to the per-event RPC NRI v0.12 runtimes call (older
runtimes send the same event as ``StateChange``). The stub derives a plugin's subscription from
which of these methods the plugin has.
"""

from __future__ import annotations

from dataclasses import dataclass

from nri_plugin import api


@dataclass(frozen=True)
class EventSpec:
    event: int  # api.Event value
    method: str  # plugin method name
    rpc: str  # Plugin service RPC that carries it (per-event RPC, or the dedicated one)
    with_container: bool  # the handler takes (pod, container), else (pod)

    @property
    def bit(self) -> int:
        return mask_bit(self.event)


def mask_bit(event: int) -> int:
    return 1 << (event - 1)


EVENTS = (
    EventSpec(api.RUN_POD_SANDBOX, "run_pod_sandbox", "RunPodSandbox", False),
    EventSpec(api.STOP_POD_SANDBOX, "stop_pod_sandbox", "StopPodSandbox", False),
    EventSpec(api.REMOVE_POD_SANDBOX, "remove_pod_sandbox", "RemovePodSandbox", False),
    EventSpec(api.CREATE_CONTAINER, "create_container", "CreateContainer", True),
    EventSpec(api.POST_CREATE_CONTAINER, "post_create_container", "PostCreateContainer", True),
    EventSpec(api.START_CONTAINER, "start_container", "StartContainer", True),
    EventSpec(api.POST_START_CONTAINER, "post_start_container", "PostStartContainer", True),
    EventSpec(api.UPDATE_CONTAINER, "update_container", "UpdateContainer", True),
    EventSpec(api.POST_UPDATE_CONTAINER, "post_update_container", "PostUpdateContainer", True),
    EventSpec(api.STOP_CONTAINER, "stop_container", "StopContainer", True),
    EventSpec(api.REMOVE_CONTAINER, "remove_container", "RemoveContainer", True),
    EventSpec(api.UPDATE_POD_SANDBOX, "update_pod_sandbox", "UpdatePodSandbox", False),
    EventSpec(
        api.POST_UPDATE_POD_SANDBOX, "post_update_pod_sandbox", "PostUpdatePodSandbox", False
    ),
    EventSpec(
        api.VALIDATE_CONTAINER_ADJUSTMENT,
        "validate_container_adjustment",
        "ValidateContainerAdjustment",
        True,
    ),
)
BY_EVENT = {spec.event: spec for spec in EVENTS}

# Events runtimes with NRI v0.6.1 ... v0.9 know (containerd 1.7, 2.0, 2.1). Any other bit in a
# Configure reply makes them drop the plugin.
VALID_EVENTS_V06 = 0x07FF
# NRI v0.10+ (containerd 2.2+).
VALID_EVENTS_V10 = 0x3FFF


def handled_mask(plugin: object) -> int:
    """The events ``plugin`` has a method for, as a subscription mask."""
    mask = 0
    for spec in EVENTS:
        if callable(getattr(plugin, spec.method, None)):
            mask |= spec.bit
    return mask


def valid_events(nri_version: str) -> int:
    """Events a runtime announcing ``nri_version`` (ConfigureRequest.NRI_version) accepts.

    Runtimes before NRI v0.12 announce no version; they are treated as v0.6.1 .. v0.9, the
    safe choice: a v0.10/v0.11 runtime then only misses the three newest events.
    """
    parts = nri_version.lstrip("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return VALID_EVENTS_V06
    return VALID_EVENTS_V10 if (major, minor) >= (0, 10) else VALID_EVENTS_V06


def names(mask: int) -> list[str]:
    """Method names of the events in ``mask``, for log lines."""
    return [spec.method for spec in EVENTS if mask & spec.bit]
