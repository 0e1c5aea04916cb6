"""Label selectors: what a selector refuses, and the four operators.

The refused operator re-expresses a case of Koordinator v1.8.0's Test_filterNodes
(pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go).
"""

from __future__ import annotations

from typing import Any

import pytest

from descheduler.fields import ArgsError
from descheduler.selectors import LabelSelector

# -- label selectors (Test_filterNodes) -----------------------------------------------------


def test_filter_nodes_with_an_invalid_selector() -> None:
    with pytest.raises(ArgsError, match="'non-exist-operator' is not a valid"):
        LabelSelector.parse(
            {"matchExpressions": [{"key": "test", "operator": "non-exist-operator"}]},
            "nodeSelector",
        )


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, {"zone": "b"}, True),
        ({"key": "zone", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, {}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, {"zone": "a"}, False),
        ({"key": "gpu", "operator": "Exists"}, {"gpu": ""}, True),
        ({"key": "gpu", "operator": "DoesNotExist"}, {"gpu": ""}, False),
    ],
)
def test_label_selector_operators(
    expression: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    selector = LabelSelector.parse({"matchExpressions": [expression]}, "s")
    assert selector.matches(labels) is matches
