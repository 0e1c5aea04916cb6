"""The shared data model: Koordinator's QoS classes, priorities, resource names, label and
annotation keys, annotation formats, feature gates and the NodeSLO spec with its defaults.

Every component imports its key strings and parsers from here; none redefines them. No I/O:
parsing takes strings and mappings and raises ``errors.ModelError`` subclasses with a message
that names the key and what is wrong.
"""
