"""The one Kubernetes layer: every call to an API server from koord-manager, koord-scheduler
and koordlet's cluster mode goes through here.

``resources`` names the kinds, ``client`` builds the lightkube client (kubeconfig or in-cluster
service account) and moves plain JSON dicts in and out of it with the retry loops for writes,
``errors`` is what a failed call raises (``NotFound``, ``Conflict``, ``TransportError``...),
``informer`` keeps list+watch caches, ``podindex`` indexes pods by node, ``workqueue``
deduplicates keys for reconcilers, ``leader`` runs Lease leader election and ``eviction`` asks
for pod evictions through the Eviction API. ``probes`` (/healthz, /readyz, /metrics) and
``tlsreload`` (serving certificates that follow their files) are the serving helpers of the
control-plane daemons. The in-process fake API server for tests is tests/fakekube.py,
outside the package.

No policy lives here: the components turn the dicts into decisions with their own pure
modules. This package imports only ``koordapi`` and third-party libraries, and nothing at
package level: koordlet's standalone start-up, which never talks to an API server, does not
import it at all.
"""
