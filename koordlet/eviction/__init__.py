"""How koordlet evicts a pod once the QoS manager has chosen it: the backends (``backends``:
stop its containers through CRI, or the Eviction API) and the CRI client (``cri``).

Not kernel state, so not ``koordlet.executor``: a backend asks the container runtime or the
API server. Choosing the victims is ``koordlet.qosmanager.eviction``'s.
"""
