"""koord-scheduler: a load-aware, NUMA-aware extender for the stock kube-scheduler. Coming with
the scheduler issue.
"""
