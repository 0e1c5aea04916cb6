"""The ConfigMap validating webhook (/validate-configmap): guards slo-controller-config only.

The content rules live in ``manager.sloconfig.validate_slo_configmap`` (one message per
problem), imported when first needed so this module does not pull in the NodeSLO code at
import time; an allowed ConfigMap gets an admission warning for each thing it sets that is
accepted but changes nothing here (``manager.unsupported``, imported the same way). Every
other ConfigMap, and any DELETE, is allowed. Pure apart from those imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from manager.webhooks.admission import AdmissionRequest, AdmissionResponse, allowed, denied

SloValidator = Callable[[Mapping[str, str]], list[str]]
SloAdvisor = Callable[[Mapping[str, str]], list[str]]
DENIED = 400  # upstream answers invalid configuration with 400 Bad Request


def slo_validator() -> SloValidator:
    """The NodeSLO configuration checker, ``manager.sloconfig.validate_slo_configmap``."""
    validator: SloValidator = importlib.import_module("manager.sloconfig").validate_slo_configmap
    return validator


def slo_advice(data: Mapping[str, str]) -> list[str]:
    """One admission warning per thing the ConfigMap sets that is accepted but changes nothing
    here (``manager.unsupported``): ``kubectl apply`` prints them."""
    found = importlib.import_module("manager.unsupported").find_unsupported(data)
    return [f"{'refused' if f.refused else 'not used here'}: {f}" for f in found]


def validate_configmap(
    request: AdmissionRequest,
    *,
    namespace: str,
    name: str,
    validator: SloValidator | None = None,
    advisor: SloAdvisor | None = None,
) -> AdmissionResponse:
    """Deny a CREATE or UPDATE of ConfigMap ``namespace/name`` whose data does not validate;
    ``validator`` defaults to the real checker (tests inject stand-ins). An allowed one gets a
    warning for each thing ``advisor`` (the server's: ``slo_advice``) says is set but changes
    nothing."""
    if request.operation not in ("CREATE", "UPDATE") or request.object is None:
        return allowed()
    configmap = request.object
    meta = configmap.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    cm_name = meta.get("name") or request.name
    cm_namespace = meta.get("namespace") or request.namespace
    if (cm_namespace, cm_name) != (namespace, name):
        return allowed()
    data: Any = configmap.get("data") or {}
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        return denied(f"configmap {namespace}/{name}: data must map strings to strings", DENIED)
    errors = (validator or slo_validator())(data)
    if errors:
        return denied(f"configmap {namespace}/{name}: " + "; ".join(errors), DENIED)
    return allowed(*(advisor(data) if advisor is not None else ()))
