"""The queue in ConfigMaps: survives the client, shared by users, guarded by resourceVersion."""

from __future__ import annotations

from dataclasses import replace

import pytest

from det_k8s.cli.live import entry_for
from det_k8s.errors import Conflict, InputError, UsageError
from det_k8s.live.queue import PAUSED, QUEUED, RUNNING, QueueEntry, QueueStore, from_configmap, to_configmap
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.groups import build_group
from det_k8s.settings import Document, load_settings

ON_REAL_CLUSTER_TOO = True

SETTINGS = load_settings([Document("s", "maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")]).settings()


def entry(entry_id: str, sequence: int, **changes) -> QueueEntry:
    """A real entry, as `experiment create` stores it, for a 2-pod mnist trial."""
    text = "name: mnist\nresources: {slots_per_trial: 8}\n"
    experiment = parse_experiment(text, "mnist.yaml").get()
    group = build_group(experiment, SETTINGS, group_id=entry_id, user="alice@example.com",
                        submitted_at="2026-11-21T12:00:00.000000Z", sequence=sequence)
    base = entry_for(experiment, text, SETTINGS, group, "default")
    return replace(base, **changes)


def test_round_trips_through_a_configmap():
    original = entry("mnist-7f3a2c", 5, state=RUNNING, attempts=2, reason="r", placement={"p0": "gpu-0"},
                     events=("queued", "placed"))
    assert from_configmap(to_configmap(original, "ml")) == original


def test_the_placement_mode_and_the_pod_group_round_trip_and_default_to_none():
    original = entry("mnist-7f3a2c", 5, state=RUNNING, placement_mode="native", pod_group="v1beta1/det-k8s-mnist-7f3a2c")
    stored = to_configmap(original, "ml")
    assert '"placement": "native"' in stored["data"]["entry.json"]
    assert '"podGroup": "v1beta1/det-k8s-mnist-7f3a2c"' in stored["data"]["status.json"]
    assert from_configmap(stored) == original
    plain = to_configmap(entry("mnist-7f3a2c", 5), "ml")  # entries written before: no keys, the policy decides
    assert "placement" not in plain["data"]["entry.json"] and "podGroup" not in plain["data"]["status.json"]
    assert (from_configmap(plain).placement_mode, from_configmap(plain).pod_group) == ("", "")


def test_labels_allow_kubectl_to_find_entries_and_user_labels_are_valid():
    cm = to_configmap(entry("a", 1), "ml")
    labels = cm["metadata"]["labels"]
    assert labels["det-k8s.io/queue-entry"] == "true"
    assert labels["det-k8s.io/state"] == "queued"
    assert labels["det-k8s.io/user"] == "alice-example.com"
    assert "determined" not in labels  # `pods cleanup` (label determined) must never delete the queue


def test_entries_are_stored_in_the_cluster_and_listed_in_submission_order(cluster):
    store = QueueStore(cluster.connect(), "default")
    store.add(entry("b", 2))
    store.add(entry("a", 1))
    again = QueueStore(cluster.connect(), "default")  # a new client sees the same queue
    assert [e.id for e in again.entries()] == ["a", "b"]
    entries = [cm for cm in cluster.api.items("configmaps")  # a real cluster has its own (kube-root-ca.crt)
               if (cm["metadata"].get("labels") or {}).get("det-k8s.io/queue-entry") == "true"]
    assert len(entries) == 2


def test_filtering_by_state(cluster):
    store = QueueStore(cluster.connect(), "default")
    store.add(entry("a", 1))
    store.add(entry("b", 2, state=PAUSED))
    assert [e.id for e in store.entries([QUEUED, RUNNING])] == ["a"]


def test_updates_are_optimistic(cluster):
    store = QueueStore(cluster.connect(), "default")
    added = store.add(entry("a", 1))
    store.update(added.with_event("placed", state=RUNNING))
    with pytest.raises(Conflict):
        store.update(added.with_event("paused", state=PAUSED))  # stale: based on the old version
    assert store.get("a").state == RUNNING
    assert store.get("a").events[-1] == "placed"


def test_find_by_unique_prefix(cluster):
    store = QueueStore(cluster.connect(), "default")
    store.add(entry("mnist-7f3a2c", 1))
    store.add(entry("mnist-7f9911", 2))
    assert store.find("mnist-7f3").id == "mnist-7f3a2c"
    with pytest.raises(UsageError, match="matches 2 experiments"):
        store.find("mnist-7f")
    with pytest.raises(UsageError, match="no experiment nope"):
        store.find("nope")


def test_delete(cluster):
    store = QueueStore(cluster.connect(), "default")
    store.delete(store.add(entry("a", 1)))
    assert store.entries() == []


@pytest.mark.parametrize(("key", "text"), [("group.json", '{"id": "x"}'), ("pods.json", "[1]"),
                                          ("pods.json", '[{"metadata": {"name": "other"}, "spec": {}}]'),
                                          ("service.json", "[]"), ("entry.json", "{not json")])
def test_a_malformed_entry_is_skipped_by_listing_and_named_by_get(cluster, key, text):
    store = QueueStore(cluster.connect(), "default")
    store.add(entry("good0001", 1))
    broken = to_configmap(entry("bad00002", 2), "default")
    broken["data"][key] = text
    cluster.api.put(broken)
    assert [e.id for e in store.entries()] == ["good0001"]
    assert store.skipped and "det-k8s-queue-bad00002 is not a readable queue entry" in store.skipped[0]
    with pytest.raises(InputError, match="det-k8s-queue-bad00002 is not a readable queue entry"):
        store.get("bad00002")


HOSTILE = {
    "deeply nested": {"entry.json": "[" * 10000 + "]" * 10000},
    "not an object": {"entry.json": '"text"'},
    "a huge number": {"entry.json": '{"priority": ' + "9" * 5000 + "}"},
    "an infinite priority": {"entry.json": '{"priority": 1e999}'},
    "placement of another shape": {"status.json": '{"placement": ["gpu-0"]}'},
    "doomed of another shape": {"status.json": '{"doomed": "all"}'},
    "data that is a list": None,
}


@pytest.mark.parametrize("case", sorted(set(HOSTILE) - {"data that is a list"}))
def test_a_bad_entry_is_quarantined_and_never_blocks_the_namespace(cluster, run_cli, tmp_path, case):
    quarantined(cluster, run_cli, tmp_path, case)


@pytest.mark.emulator_only  # the real API server refuses a ConfigMap whose data is a list (400): only the emulator stores it
def test_an_entry_whose_data_is_a_list_is_quarantined_and_never_blocks_the_namespace(cluster, run_cli, tmp_path):
    quarantined(cluster, run_cli, tmp_path, "data that is a list")


def quarantined(cluster, run_cli, tmp_path, case: str) -> None:
    from tests.support.k8s_emulator import node

    good = to_configmap(entry("good0001", 2), "default")
    bad = to_configmap(entry("bad00001", 1), "default")
    bad["data"] = ["x"] if HOSTILE[case] is None else {**bad["data"], **HOSTILE[case]}
    cluster.api.put(good)
    cluster.api.put(bad)
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    store = QueueStore(cluster.connect(), "default")
    assert [e.id for e in store.entries()] == ["good0001"]
    assert len(store.skipped) == 1 and store.skipped[0].startswith(
        "configmap default/det-k8s-queue-bad00001 is not a readable queue entry (")
    listed = run_cli("experiment", "list")
    assert listed.code == 0 and "good0001" in listed.out and listed.err.count("det-k8s-queue-bad00001") == 1
    ran = run_cli("scheduler", "run", "--once")
    assert ran.code == 0, ran.err
    assert len(cluster.api.items("pods")) == 2  # the good entry was scheduled all the same
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    experiment = tmp_path / "e.yaml"
    experiment.write_text("name: small\nresources: {slots_per_trial: 1}\n")
    created = run_cli("experiment", "create", experiment, "-f", settings)
    assert created.code == 0 and "internal error" not in created.err
