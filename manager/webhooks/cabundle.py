"""The caBundle of koord-manager's webhook configurations, kept equal to the CAs it serves with.

Handed to ``koordkube.certkeeper.CertificateKeeper`` as ``on_ca``: each pass reads both
configurations (Koordinator's names by default) and writes one back, with its
resourceVersion, only when a webhook's ``clientConfig.caBundle`` differs; a configuration that
is not there (a manager run outside the chart) is said once and skipped.

What the keeper hands over is a PEM bundle: the CA and, after a CA change, the CA it replaced
(until that one ends). A CA of ours already in a caBundle that began after all of those stays:
another replica replaced the CA after this one read the Secret, and may already serve a pair
of the new CA (``ca_bundle``); the writes carry the resourceVersion, so this holds whatever
order two replicas' writes land in.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from koordkube import certs
from koordkube.client import KubeApi, update_with_retry
from koordkube.errors import NotFound

log = logging.getLogger(__name__)

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
# Koordinator's (pkg/webhook/util: MUTATING_WEBHOOK_NAME, VALIDATING_WEBHOOK_NAME)
DEFAULT_MUTATING = "koordinator-mutating-webhook-configuration"
DEFAULT_VALIDATING = "koordinator-validating-webhook-configuration"


def ca_bundle(current: str | None, trusted: bytes) -> str:
    """The caBundle (base64) of a webhook whose caBundle is ``current``: ``trusted`` (PEM) as
    it is, and after it each CA of ours (``certs.CA_COMMON_NAME``) in ``current`` that began
    after every CA in ``trusted`` (another replica's new CA, not read by this one yet). The
    rest of ``current`` goes: a replaced CA that has ended, a CA set by hand, garbage."""
    wanted = certs.pem_certificates(trusted)
    newer: list[x509.Certificate] = []
    if wanted and current:
        newest = max(cert.not_valid_before_utc for cert in wanted)
        try:
            present = certs.pem_certificates(base64.b64decode(current, validate=True))
        except ValueError:
            present = []
        newer = [
            cert
            for cert in present
            if certs.is_own_ca(cert) and cert.not_valid_before_utc > newest and cert not in wanted
        ]
    if newer:
        trusted = certs.with_newline(trusted) + b"".join(
            cert.public_bytes(serialization.Encoding.PEM) for cert in newer
        )
    return base64.b64encode(trusted).decode()


def with_ca_bundle(configuration: dict[str, Any], trusted: bytes) -> dict[str, Any] | None:
    """The configuration with every webhook trusting ``trusted`` (PEM, see ``ca_bundle``);
    None when each already does."""
    changed = False
    for hook in configuration.get("webhooks") or []:
        client = hook.setdefault("clientConfig", {})
        wanted = ca_bundle(client.get("caBundle"), trusted)
        if client.get("caBundle") != wanted:
            client["caBundle"] = wanted
            changed = True
    return configuration if changed else None


class CABundleWriter:
    """``on_ca`` for the certificate keeper; ``updates`` counts the configurations written."""

    def __init__(self, api: KubeApi, configurations: Sequence[tuple[str, str]]) -> None:
        self.api = api
        self.configurations = list(configurations)  # (kind, name)
        self.updates = 0
        self._missing: set[tuple[str, str]] = set()

    async def __call__(self, trusted: bytes) -> None:
        """Make every webhook trust ``trusted`` (PEM: the CA, the CAs it replaced)."""
        from lightkube.resources.admissionregistration_v1 import (  # noqa: PLC0415
            MutatingWebhookConfiguration,
            ValidatingWebhookConfiguration,
        )

        resources = {
            MUTATING: MutatingWebhookConfiguration,
            VALIDATING: ValidatingWebhookConfiguration,
        }
        for kind, name in self.configurations:
            res = resources[kind]
            wrote = False

            def mutate(current: dict[str, Any]) -> dict[str, Any] | None:
                return with_ca_bundle(current, trusted)

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
                log.info("set the caBundle of %s %s to the serving CAs", kind, name)
