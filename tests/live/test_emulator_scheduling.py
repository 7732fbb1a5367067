"""The API emulator refuses and answers as a real API server does for what scheduling the master's pods needs:
pods/binding, pods/status, Events, priority admission, watch (resourceVersion, bookmarks, 410 Gone) and schema
validation, all through the real `kubernetes` client and det-k8s's adapter."""

from __future__ import annotations

import threading
import time

import pytest

from det_k8s.errors import Conflict, Expired, Forbidden, NotFound, Rejected
from det_k8s.kube.kinds import EVENTS, NODES, PODS
from tests.support.k8s_emulator import node

ON_REAL_CLUSTER_TOO = True


def pending_pod(name: str, **spec):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "x"}},
            "spec": {"schedulerName": "coscheduler", "containers": [{"name": "c", "image": "busybox"}], **spec}}


def binding(name: str, node_name: str = "n1", uid: str | None = None, **extra):
    meta = {"name": name, **({"uid": uid} if uid else {})}
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}, **extra}


@pytest.fixture
def api(cluster):
    cluster.api.put(node("n1", gpus=4))
    return cluster.connect()


def test_binding_sets_the_node_and_the_scheduled_condition(cluster, api):
    created = api.create(PODS, pending_pod("p1"))
    status = api.create_subresource(PODS, "p1", "binding", binding("p1", uid=created["metadata"]["uid"]))
    assert status["status"] == "Success"
    pod = api.get(PODS, "p1")
    assert pod["spec"]["nodeName"] == "n1"
    assert [c["status"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"] == ["True"]
    if hasattr(cluster.api, "bindings"):  # the emulator's record of every binding (the real server keeps none)
        assert [(ns, name, where) for ns, name, where, _ in cluster.api.bindings] == [("default", "p1", "n1")]


# real server finds: kube-apiserver 1.37.2 answers a Binding whose target.kind is Pod or whose target.name is missing
# with 500 (an aggregate error, not 422), and accepts one with an unknown field ('targt': the default field validation
# only warns); the emulator refuses all three as invalid
@pytest.mark.emulator_only
def test_binding_refusals_match_the_api_server(api):
    created = api.create(PODS, pending_pod("p1"))
    with pytest.raises(NotFound):
        api.create_subresource(PODS, "ghost", "binding", binding("ghost"))
    with pytest.raises(Rejected, match="name in URL does not match"):
        api.create_subresource(PODS, "p1", "binding", binding("p2"))
    with pytest.raises(Rejected, match="target.kind"):
        api.create_subresource(PODS, "p1", "binding", {**binding("p1"), "target": {"kind": "Pod", "name": "n1"}})
    with pytest.raises(Rejected, match="target.name: Required value"):
        api.create_subresource(PODS, "p1", "binding", {**binding("p1"), "target": {"kind": "Node"}})
    with pytest.raises(Rejected, match="'targt' was unexpected"):  # the schema: a misspelt field
        api.create_subresource(PODS, "p1", "binding", {**binding("p1"), "targt": {}})
    with pytest.raises(Conflict, match="Precondition failed: UID"):
        api.create_subresource(PODS, "p1", "binding", binding("p1", uid="not-its-uid"))
    api.create_subresource(PODS, "p1", "binding", binding("p1", uid=created["metadata"]["uid"]))
    with pytest.raises(Conflict, match='already assigned to node "n1"'):
        api.create_subresource(PODS, "p1", "binding", binding("p1", "n2"))
    assert api.get(PODS, "p1")["spec"]["nodeName"] == "n1"  # the refused binding changed nothing


@pytest.mark.emulator_only  # the emulator switches graceful pod deletion on and off
def test_a_pod_being_deleted_cannot_be_bound(cluster, api):
    cluster.api.graceful_pods = True
    api.create(PODS, pending_pod("p1"))
    api.delete(PODS, "p1")
    with pytest.raises(Conflict, match="is being deleted"):
        api.create_subresource(PODS, "p1", "binding", binding("p1"))


# real server finds: kube-apiserver 1.37.2 accepts a pod condition of status 'Maybe' through pods/status, which the
# emulator refuses
@pytest.mark.emulator_only
def test_status_patches_merge_conditions_by_type_and_touch_only_status(api):
    api.create(PODS, pending_pod("p1"))
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "waiting",
                 "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    api.patch_subresource(PODS, "p1", "status", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    after = api.patch_subresource(PODS, "p1", "status", {"status": {"conditions": [condition]},
                                                          "spec": {"nodeName": "n1"}})
    assert sorted(c["type"] for c in after["status"]["conditions"]) == ["PodScheduled", "Ready"]
    assert "nodeName" not in after["spec"]  # /status changes only the status
    with pytest.raises(Rejected, match="Unsupported value: 'Maybe'"):
        api.patch_subresource(PODS, "p1", "status", {"status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}})
    with pytest.raises(Rejected, match="is not a 'date-time'"):
        api.patch_subresource(PODS, "p1", "status", {"status": {"conditions": [
            {**condition, "lastTransitionTime": "yesterday"}]}})
    with pytest.raises(Conflict):  # a stale resourceVersion in the patch is refused
        api.patch_subresource(PODS, "p1", "status", {"metadata": {"resourceVersion": "1"},
                                                      "status": {"conditions": [condition]}})


# real server finds: kube-apiserver 1.37.2 accepts an Event named 'P1_bad' (the emulator wants an RFC 1123 subdomain)
# and refuses a count of 'one' when decoding ("cannot unmarshal string into Go struct field Event.count"), not by schema
@pytest.mark.emulator_only
def test_events_are_checked_like_core_v1_events(api):
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p1.abc", "namespace": "default"},
             "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p1", "namespace": "default"},
             "reason": "GangWaiting", "message": "m", "type": "Normal", "source": {"component": "det-k8s"},
             "count": 1, "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"}
    api.create(EVENTS, event)
    assert [e["reason"] for e in api.list(EVENTS, field_selector="involvedObject.name=p1,reason=GangWaiting")] == [
        "GangWaiting"]
    with pytest.raises(Rejected, match="does not match event.namespace"):
        api.create(EVENTS, {**event, "metadata": {"name": "p1.b"},
                            "involvedObject": {**event["involvedObject"], "namespace": "other"}})
    with pytest.raises(Rejected, match="count: 'one' is not of type 'integer'"):
        api.create(EVENTS, {**event, "metadata": {"name": "p1.c"}, "count": "one"})
    with pytest.raises(Rejected, match="reportingInstance: Required value"):  # new-style events need more
        api.create(EVENTS, {**event, "metadata": {"name": "p1.d"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                            "reportingComponent": "det-k8s", "action": "Scheduling"})
    with pytest.raises(Rejected, match="RFC 1123 subdomain"):
        api.create(EVENTS, {**event, "metadata": {"name": "P1_bad"}})


def test_priority_admission_resolves_the_priority_class(cluster, api):
    cluster.api.put({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                     "value": 90, "preemptionPolicy": "Never"})
    assert api.create(PODS, pending_pod("p1", priorityClassName="high"))["spec"]["priority"] == 90
    assert api.create(PODS, pending_pod("p2"))["spec"]["priority"] == 0
    with pytest.raises(Forbidden, match="no PriorityClass with name missing was found"):
        api.create(PODS, pending_pod("p3", priorityClassName="missing"))


def watch_into(api, found, stop, **kwargs):
    def run():
        try:
            for event in api.watch(PODS, all_namespaces=True, timeout_seconds=5, **kwargs):
                found.append(event)
                if stop(event):
                    return
        except Exception as exc:  # collected for the assertion
            found.append({"type": "EXC", "object": exc})

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.emulator_only  # the emulator sets the watch bookmark interval
def test_a_watch_from_a_list_sees_every_later_change_in_order_and_bookmarks(cluster, api):
    cluster.api.bookmark_interval = 0.1
    api.create(PODS, pending_pod("before"))
    items, version = api.list_page(PODS, all_namespaces=True)
    assert [i["metadata"]["name"] for i in items] == ["before"]
    found: list = []
    thread = watch_into(api, found, lambda e: e["type"] == "DELETED", resource_version=version)
    api.create(PODS, pending_pod("after"))
    api.create_subresource(PODS, "after", "binding", binding("after"))
    time.sleep(0.3)  # let a bookmark through
    api.delete(PODS, "after")
    thread.join(10)
    changes = [(e["type"], e["object"]["metadata"].get("name")) for e in found if e["type"] != "BOOKMARK"]
    assert changes == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]
    marks = [int(e["object"]["metadata"]["resourceVersion"]) for e in found if e["type"] == "BOOKMARK"]
    assert marks and all(e["object"]["kind"] == "Pod" for e in found if e["type"] == "BOOKMARK")
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in found if e["type"] != "BOOKMARK"]
    assert versions == sorted(versions) and versions[0] > int(version)


def test_a_pod_leaving_a_watch_selection_is_deleted_from_its_view(cluster, api):
    api.create(PODS, pending_pod("p1"))
    _, version = api.list_page(PODS, all_namespaces=True)
    found: list = []
    thread = watch_into(api, found, lambda e: e["type"] == "DELETED", resource_version=version,
                        field_selector="status.phase!=Succeeded,status.phase!=Failed")
    time.sleep(0.1)
    cluster.api.update("pods", "p1", {"status": {"phase": "Succeeded"}})
    thread.join(10)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in found if e["type"] != "BOOKMARK"] == [
        ("DELETED", "p1")]


@pytest.mark.emulator_only  # the emulator compacts its history on demand
def test_a_watch_from_a_forgotten_version_is_gone_and_one_from_now_starts_with_the_objects(cluster, api):
    api.create(PODS, pending_pod("p1"))
    _, version = api.list_page(PODS, all_namespaces=True)
    cluster.api.compact()
    with pytest.raises(Expired, match="too old resource version"):
        list(api.watch(PODS, all_namespaces=True, resource_version=version, timeout_seconds=1))
    found: list = []
    watch_into(api, found, lambda e: True).join(10)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in found] == [("ADDED", "p1")]


@pytest.mark.emulator_only  # the emulator ends open watches on demand
def test_an_open_watch_ends_with_410_after_a_compaction(cluster, api):
    _, version = api.list_page(NODES)
    found: list = []
    thread = watch_into(api, found, lambda e: False, resource_version=version)
    time.sleep(0.2)
    cluster.api.expire_watches()
    thread.join(10)
    assert isinstance(found[-1]["object"], Expired)
