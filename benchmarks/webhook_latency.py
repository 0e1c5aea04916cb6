"""Admission webhook latency under load, over HTTPS on localhost.

A WebhookServer runs in its own process (one event loop, as in koord-manager) with one
ClusterColocationProfile and the Helm PriorityClasses; N concurrent clients in this process
post AdmissionReviews for a pod the profile turns into a batch pod (so every answer carries a
JSON Patch) for a few seconds over keep-alive TLS connections, as the apiserver does. Latency
is client side: request sent to answer parsed. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/webhook_latency.py [-c 16] [-d 5] [--route /mutate-pod]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import trustme

from manager.webhooks.server import StaticStateProvider, WebhookServer

SERVICE, NAMESPACE = "koord-manager", "koordinator-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"
PRIORITY_CLASSES = {
    name: {"metadata": {"name": name}, "value": value, "preemptionPolicy": "PreemptLowerPriority"}
    for name, value in (("koord-prod", 9000), ("koord-mid", 7000), ("koord-batch", 5000))
}
PROFILE = {
    "metadata": {"name": "colocation-batch"},
    "spec": {
        "selector": {"matchLabels": {"app": "spark"}},
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "labels": {"team": "data"},
    },
}


def review(i: int) -> bytes:
    resources = {"cpu": "2", "memory": "4Gi"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"spark-{i}", "namespace": "team-a", "labels": {"app": "spark"}},
        "spec": {
            "containers": [
                {
                    "name": name,
                    "image": "spark:3.5",
                    "resources": {"requests": resources, "limits": resources},
                }
                for name in ("driver", "sidecar")
            ]
        },
    }
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{i}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a",
            "operation": "CREATE",
            "object": pod,
        },
    }
    return json.dumps(body).encode()


def _serve(cert_dir: str, ports: Any) -> None:
    async def main() -> None:
        provider = StaticStateProvider([PROFILE], dict(PRIORITY_CLASSES), {})
        server = WebhookServer("127.0.0.1", 0, cert_dir, provider, NAMESPACE)
        await server.start()
        ports.put(server.bound_port)
        await asyncio.Event().wait()  # until terminated

    asyncio.run(main())


async def _client(
    session: aiohttp.ClientSession,
    *,
    url: str,
    context: ssl.SSLContext,
    deadline: float,
    warmup_until: float,
    latencies: list[float],
    errors: list[str],
) -> None:
    i = 0
    while (start := time.perf_counter()) < deadline:
        i += 1
        async with session.post(
            url,
            data=review(i),
            headers={"Content-Type": "application/json"},
            ssl=context,
            server_hostname=SERVER_NAME,
        ) as response:
            answer = await response.json()
        elapsed = time.perf_counter() - start
        if response.status != 200 or not answer["response"]["allowed"]:
            errors.append(f"{response.status}: {answer}")
        elif start >= warmup_until:
            latencies.append(elapsed)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(
    port: int, ca: trustme.CA, clients: int, duration: float, route: str
) -> dict[str, Any]:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    latencies: list[float] = []
    errors: list[str] = []
    url = f"https://127.0.0.1:{port}{route}"
    warmup = 1.0
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        now = time.perf_counter()
        await asyncio.gather(
            *(
                _client(
                    session,
                    url=url,
                    context=context,
                    deadline=now + warmup + duration,
                    warmup_until=now + warmup,
                    latencies=latencies,
                    errors=errors,
                )
                for _ in range(clients)
            )
        )
    ms = [v * 1000 for v in latencies]
    return {
        "route": route,
        "clients": clients,
        "seconds": duration,
        "requests": len(ms),
        "errors": len(errors),
        "throughput_rps": round(len(ms) / duration, 1),
        "p50_ms": round(_percentile(ms, 0.50), 2) if ms else None,
        "p90_ms": round(_percentile(ms, 0.90), 2) if ms else None,
        "p99_ms": round(_percentile(ms, 0.99), 2) if ms else None,
        "max_ms": round(max(ms), 2) if ms else None,
        "mean_ms": round(statistics.fmean(ms), 2) if ms else None,
        "review_bytes": len(review(0)),
        "first_error": errors[0][:200] if errors else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--clients", type=int, default=16)
    parser.add_argument("-d", "--duration", type=float, default=5.0)
    parser.add_argument("--route", default="/mutate-pod", choices=["/mutate-pod", "/validate-pod"])
    args = parser.parse_args(argv)

    ca = trustme.CA()
    with tempfile.TemporaryDirectory() as cert_dir:
        cert = ca.issue_cert(SERVICE, f"{SERVICE}.{NAMESPACE}", SERVER_NAME)
        Path(cert_dir, "tls.crt").write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
        Path(cert_dir, "tls.key").write_bytes(cert.private_key_pem.bytes())
        spawn = multiprocessing.get_context("spawn")
        ports = spawn.Queue()
        server = spawn.Process(target=_serve, args=(cert_dir, ports), daemon=True)
        server.start()
        try:
            port = ports.get(timeout=30)
            result = asyncio.run(load(port, ca, args.clients, args.duration, args.route))
        finally:
            server.terminate()
            server.join(10)
    result["python"] = sys.version.split()[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
