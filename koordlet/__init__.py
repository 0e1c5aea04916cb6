"""koordlet, the node QoS daemon: collectors, metric cache, QoS strategies, the resource
executor and the NRI hook server. Coming with the runtime-hooks and metrics issues.
"""
