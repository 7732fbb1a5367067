"""The version table: parsing, ordering, and that every row cites where it comes from."""

from __future__ import annotations

import pytest

from det_k8s.determined import versions as V


@pytest.mark.parametrize(("text", "expected"), [
    ("0.17.15", V.Version(0, 17, 15)), ("v0.38.1", V.Version(0, 38, 1)), (" 0.26.2 ", V.Version(0, 26, 2)),
])
def test_parses_release_tags(text: str, expected: V.Version) -> None:
    assert V.parse_version(text) == expected


@pytest.mark.parametrize("text", ["", "0.17", "0.17.15-dev", "latest", "0.17.15\n0.1.1", "１.２.３"])
def test_refuses_what_is_not_a_release(text: str) -> None:
    assert V.parse_version(text) is None


def test_orders_numerically_not_as_text() -> None:
    assert V.v("0.9.0") < V.v("0.17.15") < V.v("0.26.2") < V.v("0.38.1")


def test_bounds_are_inclusive_since_exclusive_until() -> None:
    assert not V.has("checkpoint_storage.gcs.prefix", V.v("0.18.1"))
    assert V.has("checkpoint_storage.gcs.prefix", V.v("0.18.2"))
    assert V.has("master.resource_manager.namespace", V.v("0.34.9"))
    assert not V.has("master.resource_manager.namespace", V.v("0.35.0"))
    assert V.has("master.resource_manager.default_namespace", V.v("0.35.0"))


def test_every_row_cites_a_tag_and_a_path() -> None:
    for row in V.FACTS:
        tag, _, path = row.source.partition(" ")
        assert V.parse_version(tag) is not None, row
        assert "/" in path, row


def test_supported_range() -> None:
    assert V.supported(V.v("0.17.0")) and V.supported(V.v("0.38.9")) and V.supported(V.DEFAULT)
    assert not V.supported(V.v("0.16.4")) and not V.supported(V.v("0.39.0")) and not V.supported(V.v("1.0.0"))
