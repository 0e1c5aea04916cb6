"""The metric cache: time series the collectors write and everything else reads."""

from koordlet.metriccache.store import Aggregate, MetricCache, Sample, percentile

__all__ = ["Aggregate", "MetricCache", "Sample", "percentile"]
