"""The caBundle of koord-manager's webhook configurations, kept equal to the CA it serves with.

Handed to ``koordkube.certkeeper.CertificateKeeper`` as ``on_ca``: each pass reads both
configurations (Koordinator's names by default) and writes one back, with its
resourceVersion, only when a webhook's ``clientConfig.caBundle`` differs; a configuration that
is not there (a manager run outside the chart) is said once and skipped.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

from koordkube.client import KubeApi, update_with_retry
from koordkube.errors import NotFound

log = logging.getLogger(__name__)

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
# Koordinator's (pkg/webhook/util: MUTATING_WEBHOOK_NAME, VALIDATING_WEBHOOK_NAME)
DEFAULT_MUTATING = "koordinator-mutating-webhook-configuration"
DEFAULT_VALIDATING = "koordinator-validating-webhook-configuration"


def with_ca_bundle(configuration: dict[str, Any], ca_bundle: str) -> dict[str, Any] | None:
    """The configuration with every webhook trusting ``ca_bundle`` (base64); None when each
    already does."""
    changed = False
    for hook in configuration.get("webhooks") or []:
        client = hook.setdefault("clientConfig", {})
        if client.get("caBundle") != ca_bundle:
            client["caBundle"] = ca_bundle
            changed = True
    return configuration if changed else None


class CABundleWriter:
    """``on_ca`` for the certificate keeper; ``updates`` counts the configurations written."""

    def __init__(self, api: KubeApi, configurations: Sequence[tuple[str, str]]) -> None:
        self.api = api
        self.configurations = list(configurations)  # (kind, name)
        self.updates = 0
        self._missing: set[tuple[str, str]] = set()

    async def __call__(self, ca_cert: bytes) -> None:
        from lightkube.resources.admissionregistration_v1 import (  # noqa: PLC0415
            MutatingWebhookConfiguration,
            ValidatingWebhookConfiguration,
        )

        resources = {
            MUTATING: MutatingWebhookConfiguration,
            VALIDATING: ValidatingWebhookConfiguration,
        }
        bundle = base64.b64encode(ca_cert).decode()
        for kind, name in self.configurations:
            res = resources[kind]
            wrote = False

            def mutate(current: dict[str, Any]) -> dict[str, Any] | None:
                return with_ca_bundle(current, bundle)

            async def read(res: Any = res, name: str = name) -> dict[str, Any]:
                return await self.api.get(res, name)

            async def write(obj: dict[str, Any], res: Any = res) -> dict[str, Any]:
                nonlocal wrote
                stored = await self.api.replace(res, obj)
                wrote = True
                return stored

            try:
                await update_with_retry(
                    read,
                    mutate,
                    write,
                    what=f"caBundle of {kind} {name}",
                )
            except NotFound:
                if (kind, name) not in self._missing:
                    log.warning("no %s %s: its caBundle is not kept", kind, name)
                    self._missing.add((kind, name))
                continue
            self._missing.discard((kind, name))
            if wrote:
                self.updates += 1
                log.info("set the caBundle of %s %s to the serving CA", kind, name)
