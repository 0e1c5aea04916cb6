"""The webhook server over real HTTPS on localhost: trustme CA, a serving certificate with the
SANs a Service gets, and a client verifying it as the apiserver does (ServerName
``<svc>.<ns>.svc``). AdmissionReview JSON goes in, answers come out, patches are applied with
``jsonpatch``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest
import trustme

from koordapi import keys
from koordapi.annotation import parse_extended_resource_spec
from manager.webhooks.server import StateProvider, StaticStateProvider, WebhookServer
from tests.unit.manager.webhooks import builders
from tests.unit.manager.webhooks.builders import PRIORITY_CLASSES, container, pod, profile, qos_pod

SERVICE, NAMESPACE = "koord-manager", "koordinator-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"
CPU2_MEM4 = {"cpu": "2", "memory": "4Gi"}
BATCH_PROFILE = profile(
    "colocation-batch",
    namespaceSelector={"matchLabels": {"colocation": "enabled"}},
    selector={"matchLabels": {"app": "spark"}},
    qosClass="BE",
    priorityClassName="koord-batch",
)
PROVIDER = StaticStateProvider(
    profile_list=[BATCH_PROFILE],
    priority_class_map=dict(PRIORITY_CLASSES),
    namespaces={builders.NAMESPACE: {"colocation": "enabled"}},
)


def issue(ca: trustme.CA, *extra_names: str) -> trustme.LeafCert:
    return ca.issue_cert(SERVICE, f"{SERVICE}.{NAMESPACE}", SERVER_NAME, *extra_names)


def install(cert_dir: Path, cert: trustme.LeafCert, *, key: bool = True) -> None:
    """Write tls.crt (and tls.key) the way a Secret volume updates: new files swapped in."""
    files = {"tls.crt": b"".join(blob.bytes() for blob in cert.cert_chain_pems)}
    if key:
        files["tls.key"] = cert.private_key_pem.bytes()
    for name, data in files.items():
        staging = cert_dir / f".{name}.new"
        staging.write_bytes(data)
        staging.replace(cert_dir / name)


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


class Harness:
    def __init__(
        self, server: WebhookServer, ca: trustme.CA, session: aiohttp.ClientSession
    ) -> None:
        self.server, self.ca, self.session = server, ca, session
        self.context = client_context(ca)
        self.base = f"https://127.0.0.1:{server.bound_port}"

    async def post(self, path: str, body: bytes | dict[str, Any]) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(
            self.base + path,
            data=data,
            headers={"Content-Type": "application/json"},
            ssl=self.context,
            server_hostname=SERVER_NAME,
        ) as response:
            text = await response.text()
            if response.content_type == "application/json":
                return response.status, json.loads(text)
            return response.status, text

    async def peer_certificate(self, server_name: str = SERVER_NAME) -> bytes:
        """The DER certificate a fresh connection is served."""
        _, writer = await asyncio.open_connection(
            "127.0.0.1", self.server.bound_port, ssl=self.context, server_hostname=server_name
        )
        try:
            der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        finally:
            writer.close()
            await writer.wait_closed()
        return der


@contextlib.asynccontextmanager
async def serving(
    cert_dir: Path, provider: StateProvider = PROVIDER, **kwargs: Any
) -> AsyncIterator[Harness]:
    ca = kwargs.pop("ca", None) or trustme.CA()
    if not (cert_dir / "tls.crt").exists():
        install(cert_dir, issue(ca))
    server = WebhookServer(
        "127.0.0.1", 0, cert_dir, provider, NAMESPACE, "slo-controller-config", **kwargs
    )
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Harness(server, ca, session)
    finally:
        await server.stop()


def run(tmp_path: Path, scenario: Callable[[Harness], Awaitable[None]], **kwargs: Any) -> None:
    async def main() -> None:
        async with serving(tmp_path, **kwargs) as harness:
            await scenario(harness)

    asyncio.run(asyncio.wait_for(main(), 30))


def _answer(
    status: int, answer: Any, uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002"
) -> dict[str, Any]:
    assert status == 200, answer
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == uid
    response: dict[str, Any] = answer["response"]
    return response


# -- the webhook cases over HTTPS --------------------------------------------------------------


def test_mutate_pod_batch_profile_over_https(tmp_path: Path) -> None:
    original = pod(container(requests=CPU2_MEM4, limits=CPU2_MEM4), labels={"app": "spark"})

    async def scenario(h: Harness) -> None:
        response = _answer(*await h.post("/mutate-pod", builders.review(original)))
        assert response["allowed"] is True
        assert response["patchType"] == "JSONPatch"
        mutated = jsonpatch.apply_patch(original, builders.decode_patch({"response": response}))
        assert mutated["metadata"]["labels"][keys.LABEL_QOS_CLASS] == "BE"
        assert mutated["spec"]["priority"] == 5000
        expected = {keys.BATCH_CPU: "2000", keys.BATCH_MEMORY: "4Gi"}
        assert builders.resources(mutated) == {"requests": expected, "limits": expected}
        annotation = mutated["metadata"]["annotations"][keys.ANNOTATION_EXTENDED_RESOURCE_SPEC]
        assert set(parse_extended_resource_spec(annotation)) == {"main"}

    run(tmp_path, scenario)


def test_mutate_pod_without_matching_profile_is_unchanged_over_https(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        original = pod(container(requests=CPU2_MEM4), labels={"app": "web"})
        response = _answer(*await h.post("/mutate-pod", builders.review(original)))
        assert response == {"uid": response["uid"], "allowed": True}

    run(tmp_path, scenario)


def test_namespace_labels_come_from_the_provider(tmp_path: Path) -> None:
    provider = StaticStateProvider(
        [BATCH_PROFILE], dict(PRIORITY_CLASSES), {}
    )  # namespace unlabelled

    async def scenario(h: Harness) -> None:
        original = pod(container(requests=CPU2_MEM4), labels={"app": "spark"})
        response = _answer(*await h.post("/mutate-pod", builders.review(original)))
        assert "patch" not in response

    run(tmp_path, scenario, provider=provider)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        pytest.param(
            builders.review(pod(container(requests={keys.BATCH_CPU: "1000"}))),
            "must be BE",
            id="batch-without-be",
        ),
        pytest.param(
            builders.review(
                qos_pod(
                    "LSR",
                    container(requests={"cpu": "1500m"}),
                    labels={keys.LABEL_PRIORITY_CLASS: "koord-prod"},
                )
            ),
            "integer number of CPUs",
            id="lsr-1500m",
        ),
        pytest.param(
            builders.review(qos_pod("BE", container()), "UPDATE", old=qos_pod("LS", container())),
            "field is immutable",
            id="qos-changed-on-update",
        ),
    ],
)
def test_validate_pod_rejections_over_https(
    tmp_path: Path, body: dict[str, Any], fragment: str
) -> None:
    async def scenario(h: Harness) -> None:
        response = _answer(*await h.post("/validate-pod", body))
        assert response["allowed"] is False
        assert response["status"]["code"] == 400
        assert fragment in response["status"]["message"]
        assert "patch" not in response  # validating webhooks must not patch

    run(tmp_path, scenario)


def test_validate_configmap_over_https(tmp_path: Path) -> None:
    def configmap(data: dict[str, str], name: str = "slo-controller-config") -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": NAMESPACE}, "data": data}

    def stand_in(data: Mapping[str, str]) -> list[str]:
        return [f"{key}: rejected" for key in data if key == "colocation-config"]

    async def scenario(h: Harness) -> None:
        bad = builders.review(
            configmap({"colocation-config": "{"}), kind="ConfigMap", namespace=NAMESPACE
        )
        response = _answer(*await h.post("/validate-configmap", bad))
        assert response["allowed"] is False
        assert "colocation-config: rejected" in response["status"]["message"]
        other = builders.review(
            configmap({"colocation-config": "{"}, "other"), kind="ConfigMap", namespace=NAMESPACE
        )
        assert _answer(*await h.post("/validate-configmap", other))["allowed"] is True

    run(tmp_path, scenario, slo_validator=stand_in)


def test_validate_configmap_warns_about_what_is_accepted_but_not_used(tmp_path: Path) -> None:
    data = {
        "colocation-config": '{"enable": true}',
        "resource-amplification-config": '{"enable": true, "resourceAmplificationRatio": '
        '{"cpu": 1.37}}',
    }
    body = builders.review(
        {"metadata": {"name": "slo-controller-config", "namespace": NAMESPACE}, "data": data},
        kind="ConfigMap",
        namespace=NAMESPACE,
    )

    async def scenario(h: Harness) -> None:
        response = _answer(*await h.post("/validate-configmap", body))
        assert response["allowed"] is True  # Koordinator's ConfigMap still applies
        (warning,) = response["warnings"]
        assert warning.startswith("refused: resource-amplification-config: ")
        assert warning.endswith("ignored although enable is true")

    run(tmp_path, scenario)


def test_healthz(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        async with h.session.get(
            h.base + "/healthz", ssl=h.context, server_hostname=SERVER_NAME
        ) as r:
            assert (r.status, await r.text()) == (200, "ok\n")

    run(tmp_path, scenario)


# -- bad input ---------------------------------------------------------------------------------


def _envelope(**changes: Any) -> dict[str, Any]:
    body = builders.review(pod())
    body.update({k: v for k, v in changes.items() if not k.startswith("request_")})
    body["request"].update(
        {k.removeprefix("request_"): v for k, v in changes.items() if k.startswith("request_")}
    )
    return body


@pytest.mark.parametrize("path", ["/mutate-pod", "/validate-pod", "/validate-configmap"])
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(b'{"apiVersion": ', "body is not JSON", id="malformed-json"),
        pytest.param(
            _envelope(apiVersion="admission.k8s.io/v1beta1"),
            "apiVersion must be",
            id="wrong-api-version",
        ),
        pytest.param(_envelope(request_uid=None), "request.uid is missing", id="missing-uid"),
    ],
)
def test_bad_reviews_get_http_400_with_the_reason(
    tmp_path: Path, path: str, body: bytes | dict[str, Any], reason: str
) -> None:
    async def scenario(h: Harness) -> None:
        status, text = await h.post(path, body)
        assert status == 400
        assert reason in text

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("path", "kind", "group"),
    [
        ("/mutate-pod", "Deployment", "apps"),
        ("/validate-pod", "ConfigMap", ""),
        ("/validate-configmap", "Pod", ""),
    ],
)
def test_unknown_kind_is_allowed_with_a_warning_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, path: str, kind: str, group: str
) -> None:
    body = builders.review({"metadata": {"name": "x"}}, kind=kind, group=group)

    async def scenario(h: Harness) -> None:
        response = _answer(*await h.post(path, body))
        assert response["allowed"] is True
        assert "patch" not in response
        assert len(response["warnings"]) == 1
        assert f"ignored kind {f'{group}/' if group else ''}{kind}" in response["warnings"][0]

    with caplog.at_level("WARNING", logger="manager.webhooks.server"):
        run(tmp_path, scenario)
    assert any(f"ignore {kind} " in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("path", ["/mutate-pod", "/validate-pod"])
def test_subresources_are_allowed_silently(tmp_path: Path, path: str) -> None:
    binding = {"metadata": {"name": "web"}, "target": {"kind": "Node", "name": "n1"}}
    body = builders.review(binding, kind="Binding", sub_resource="binding")

    async def scenario(h: Harness) -> None:
        response = _answer(*await h.post(path, body))
        assert response == {"uid": response["uid"], "allowed": True}

    run(tmp_path, scenario)


def test_malformed_quantities_are_denied_over_https(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        bad = pod(container(requests={"cpu": "two cores"}), labels={"app": "spark"})
        for path in ("/mutate-pod", "/validate-pod"):
            response = _answer(*await h.post(path, builders.review(bad)))
            assert response["allowed"] is False
            assert response["status"]["code"] == 400
            assert "spec.containers[main].resources.requests.cpu" in response["status"]["message"]

    run(tmp_path, scenario)


class BrokenProvider:
    def profiles(self) -> Sequence[Mapping[str, Any]]:
        raise RuntimeError("cache exploded")

    def priority_classes(self) -> Mapping[str, Mapping[str, Any]]:
        return {}

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        return {}


def test_unexpected_failure_answers_a_500_denial(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        response = _answer(
            *await h.post("/mutate-pod", builders.review(pod(), uid="u-9")), uid="u-9"
        )
        assert response["allowed"] is False
        assert response["status"]["code"] == 500

    with caplog.at_level("ERROR", logger="manager.webhooks.server"):
        run(tmp_path, scenario, provider=BrokenProvider())
    assert any("cache exploded" in (record.exc_text or "") for record in caplog.records)


def test_get_on_a_review_route_is_405(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        async with h.session.get(
            h.base + "/mutate-pod", ssl=h.context, server_hostname=SERVER_NAME
        ) as r:
            assert r.status == 405

    run(tmp_path, scenario)


# -- TLS ---------------------------------------------------------------------------------------


def test_certificate_rotation_reaches_the_next_connection(tmp_path: Path) -> None:
    ca = trustme.CA()
    first, second = issue(ca), issue(ca, f"{SERVER_NAME}.cluster.local")

    async def scenario(h: Harness) -> None:
        assert await h.peer_certificate() == ssl.PEM_cert_to_DER_cert(
            first.cert_chain_pems[0].bytes().decode()
        )
        with pytest.raises(ssl.SSLCertVerificationError):
            await h.peer_certificate(f"{SERVER_NAME}.cluster.local")
        install(tmp_path, second)
        assert await h.peer_certificate() == ssl.PEM_cert_to_DER_cert(
            second.cert_chain_pems[0].bytes().decode()
        )
        await h.peer_certificate(f"{SERVER_NAME}.cluster.local")  # the new SAN verifies
        assert h.server.certificates is not None
        assert h.server.certificates.reloads == 1

    install(tmp_path, first)
    run(tmp_path, scenario, ca=ca)


def test_half_written_certificate_pair_keeps_the_old_one(tmp_path: Path) -> None:
    ca = trustme.CA()
    first, second = issue(ca), issue(ca)
    first_der = ssl.PEM_cert_to_DER_cert(first.cert_chain_pems[0].bytes().decode())

    async def scenario(h: Harness) -> None:
        install(tmp_path, second, key=False)  # the certificate is new, the key still the old one
        assert await h.peer_certificate() == first_der
        install(tmp_path, second)
        assert await h.peer_certificate() != first_der
        status, _ = await h.post("/mutate-pod", builders.review(pod()))
        assert status == 200

    install(tmp_path, first)
    run(tmp_path, scenario, ca=ca)


def test_tls_is_at_least_1_2(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        assert h.server.certificates is not None
        assert h.server.certificates.context.minimum_version == ssl.TLSVersion.TLSv1_2
        h.context.minimum_version = h.context.maximum_version = ssl.TLSVersion.TLSv1_2
        _, writer = await asyncio.open_connection(
            "127.0.0.1", h.server.bound_port, ssl=h.context, server_hostname=SERVER_NAME
        )
        assert writer.get_extra_info("ssl_object").version() == "TLSv1.2"
        writer.close()
        await writer.wait_closed()

    run(tmp_path, scenario)


def test_untrusted_ca_is_refused_by_the_client(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        h.context = client_context(trustme.CA())
        with pytest.raises(ssl.SSLCertVerificationError):
            await h.peer_certificate()

    run(tmp_path, scenario)


def test_start_without_certificates_fails(tmp_path: Path) -> None:
    server = WebhookServer(
        "127.0.0.1", 0, tmp_path / "missing", PROVIDER, NAMESPACE, "slo-controller-config"
    )
    with pytest.raises(FileNotFoundError):
        asyncio.run(server.start())


def test_stop_is_idempotent_and_port_needs_start(tmp_path: Path) -> None:
    install(tmp_path, issue(trustme.CA()))
    server = WebhookServer("127.0.0.1", 0, tmp_path, PROVIDER, NAMESPACE)

    async def main() -> None:
        with pytest.raises(RuntimeError):
            _ = server.bound_port
        await server.start()
        assert server.bound_port > 0
        await server.stop()
        await server.stop()

    asyncio.run(main())
    assert (tmp_path / "tls.key").exists()
