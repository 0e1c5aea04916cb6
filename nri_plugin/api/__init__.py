"""The NRI API messages (``nri.pkg.api.v1alpha1``), generated from ``nri.proto``.

Usage::

    from nri_plugin import api

    adjust = api.ContainerAdjustment()
    adjust.linux.resources.cpu.shares.value = 512

The ``Optional*`` wrappers tell "set to zero" from "unset": a field is unset while its wrapper
is absent (``adjust.linux.resources.cpu.HasField("shares")``).
"""

from nri_plugin.api.nri_pb2 import *  # noqa: F403
