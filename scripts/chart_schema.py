"""Write charts/koordinator-py/values.schema.json from the chart's values.yaml.

Every key of values.yaml is declared with the type of its default, and every object refuses
keys it does not declare (``additionalProperties: false``), so a misspelt value fails the
install with Helm's message instead of being ignored. Kubernetes objects passed through as they
are (resources, affinity, labels, ...) stay free-form. Koordinator's own chart keys that this
chart does not have are declared too (any type): templates/koordinator-keys.yaml maps each one
or refuses it with a message naming ours, which a schema error could not say.

    python scripts/chart_schema.py          # rewrite the schema
    python scripts/chart_schema.py --check  # exit 1 when it is not what values.yaml gives
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "koordinator-py"
SCHEMA = CHART / "values.schema.json"

# Keys whose value is a Kubernetes object or a map the chart passes on unread.
FREE_FORM = {
    "resources",
    "affinity",
    "nodeSelector",
    "podAnnotations",
    "podLabels",
    "annotations",
    "labels",
    "rollingUpdate",
    "podSecurityContext",
    "securityContext",
    "flags",
    "loadAware",
    "data",
    "args",
    "elasticQuotaArgs",
}
# Values that take any scalar (an image tag may be written as a number).
SCALAR = {"tag": {"type": ["string", "number"]}}
# Values with a range, by their parent's key and theirs: refused at install, as the flag would
# refuse them at start (a rate of 0 turns that rate limit off; a burst is at least 1).
RANGES: dict[tuple[str, ...], dict[str, Any]] = {
    ("rateLimit", "qps"): {"type": "number", "minimum": 0},
    ("rateLimit", "perClientQps"): {"type": "number", "minimum": 0},
    ("rateLimit", "burst"): {"type": "integer", "minimum": 1},
    ("rateLimit", "perClientBurst"): {"type": "integer", "minimum": 1},
    ("webhook", "timeoutSeconds"): {"type": "integer", "minimum": 1, "maximum": 30},
    # Koordinator's plain-HTTP port; null (the default) or 0: scheduler.metrics.port
    ("scheduler", "port"): {"type": ["integer", "null"], "minimum": 0, "maximum": 65535},
}
# Koordinator's chart keys (v1.8) that ours does not have, by parent path.
KOORDINATOR_KEYS = {
    (): [
        "installation",
        "featureGates",
        "imageRepositoryHost",
        "webhookConfiguration",
        "serviceAccount",
        "deviceDaemon",
    ],
    # Koordinator's CRDs that this chart does not have: their switches change nothing here.
    ("crds",): [
        "elasticquotaprofiles",
        "noderesourcetopologies",
        "recommendations",
        "clusternetworktopologies",
        "scheduleexplanations",
    ],
    ("koordlet",): [
        "features",
        "log",
        "hostDirs",
        "runtimeClassName",
        "nodeAffinity",
        "enableServiceMonitor",
    ],
    ("manager",): ["log", "healthProbe", "resyncPeriod", "hostNetwork", "nodeAffinity"],
    ("manager", "metrics"): ["addr"],
    ("descheduler",): ["log", "hostNetwork", "nodeAffinity", "monitorEnabled"],
    ("scheduler",): [
        "log",
        "featureGates",
        "compatible122FeatureGates",
        "compatibleBelow122FeatureGates",
        "enableJobPreemption",
        "deviceShare",
        "hostNetwork",
        "nodeAffinity",
        "monitorEnabled",
    ],
}


def schema_of(value: Any, path: tuple[str, ...]) -> dict[str, Any]:
    key = path[-1] if path else ""
    if path[-2:] in RANGES:
        return dict(RANGES[path[-2:]])
    if key in SCALAR:
        return dict(SCALAR[key])
    if key == "imagePullSecrets":
        # a list of {name: ...}; Koordinator's values write the empty default as {}
        return {"anyOf": [{"type": "array"}, {"type": "object", "maxProperties": 0}]}
    if key == "featureGates" and isinstance(value, dict):
        return {"type": ["object", "null"], "additionalProperties": {"type": ["boolean", "null"]}}
    if isinstance(value, dict):
        if key in FREE_FORM:
            return {"type": "object"}
        properties = {k: schema_of(v, (*path, k)) for k, v in value.items()}
        for extra in KOORDINATOR_KEYS.get(path, []):
            properties.setdefault(extra, {"description": "Koordinator's key: mapped or refused"})
        return {"type": "object", "properties": properties, "additionalProperties": False}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    return {}  # null in values.yaml: anything


def build() -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = schema_of(values, ())
    return {"$schema": "http://json-schema.org/draft-07/schema#", **schema}


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        if SCHEMA.read_text() != text:
            print(f"{SCHEMA} is stale: run python scripts/chart_schema.py", file=sys.stderr)
            return 1
        return 0
    SCHEMA.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
