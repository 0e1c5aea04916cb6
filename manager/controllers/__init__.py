"""koord-manager's controllers: Kubernetes objects in (informer caches), decisions from the
pure modules (noderesource, sloconfig, nodeslo), writes out."""
