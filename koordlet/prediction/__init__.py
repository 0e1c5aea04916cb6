"""koordlet's peak prediction (Koordinator's pkg/koordlet/prediction): decaying histograms of
each pod's, each priority class' and the system's usage, and from them the prod reclaimable
resources the NodeMetric reports (``prodReclaimableMetric``), which koord-manager turns into
mid resources.

histogram (the decaying histogram), server (the models and their training), predictors
(Koordinator's reclaimable formulas), checkpoint (models kept across restarts), pods (what is
read of a pod), peak (the daemon's entry point).
"""
