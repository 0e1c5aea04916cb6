"""koord-manager: batch resources from node metrics, NodeSLO rendering and pod admission
webhooks. Coming with the manager issue.
"""
