"""Label selectors parsed as kubectl and the API server read them, matched against node labels offline.

The same selectors are checked against the API emulator's own matcher, which the live tests use
server-side, so `nodes map -l` picks the same nodes from a snapshot file as from a cluster.
"""

from __future__ import annotations

import pytest

from det_k8s.cluster.selector import matches, parse_selector
from det_k8s.errors import UsageError
from tests.support.k8s_emulator import label_selector_matches

LABELS = [
    {},
    {"pool": "a100"},
    {"pool": "v100", "zone": "eu-1"},
    {"pool": "", "gpu.example/broken": "true"},
    {"node-role.kubernetes.io/control-plane": ""},
]
SELECTORS = [
    "pool=a100", "pool==a100", "pool!=a100", "pool", "!pool", "pool in (a100, v100)", "pool notin (a100)",
    "pool=v100,zone=eu-1", "pool,!gpu.example/broken", "pool=", "node-role.kubernetes.io/control-plane",
    "zone in (eu-1),pool notin (a100,v100)", " pool = a100 ", "",
]


@pytest.mark.parametrize("selector", SELECTORS)
def test_matches_as_the_api_server_does(selector):
    requirements = parse_selector(selector)
    for labels in LABELS:
        assert matches(requirements, labels) == label_selector_matches(selector, labels), (selector, labels)


@pytest.mark.parametrize("selector", ["pool in (a100", "=a100", "pool=a b", "pool in (a,b c)", "pool>3", "a=b=c"])
def test_what_it_cannot_read_is_a_usage_error_naming_the_part(selector):
    with pytest.raises(UsageError) as raised:
        parse_selector(selector)
    assert selector in raised.value.message and raised.value.exit_code == 2
