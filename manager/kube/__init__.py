"""koord-manager's Kubernetes I/O: the only place in ``manager`` that talks to the API server.

``resources`` names the kinds, ``client`` builds the lightkube client and moves plain JSON dicts
in and out of it, ``informer`` keeps list+watch caches, ``workqueue`` deduplicates keys for the
reconcilers and ``leader`` runs Lease leader election. No policy lives here: controllers turn
the dicts into decisions with the pure manager modules. The fake API server for tests is
``manager.testing``.
"""
