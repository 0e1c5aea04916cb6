"""The NRI wire protocol in Python: socket multiplexer, ttrpc, the NRI API and a plugin stub.

containerd talks to NRI plugins over ttrpc on a multiplexed Unix socket; this package speaks
that protocol and knows nothing about QoS. Coming with the NRI protocol issue.
"""
