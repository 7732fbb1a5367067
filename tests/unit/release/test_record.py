"""helm's release record as det-k8s reads and marks it (release/record.py); the real helm 3 and 4 reading what det-k8s
wrote is tests/real/test_release_lifecycle.py."""

from __future__ import annotations

import base64
import gzip
import json

from det_k8s.labels import SEEN_READY
from det_k8s.release.record import decode, encode, failed_patch, last_seen_ready, revisions, state


def _secret(version: int, status: str, release: dict | None = None, **labels: str) -> dict:
    body = release or {"name": "demo", "version": version, "info": {"status": status, "description": "Upgrade complete"}}
    stored = base64.b64encode(gzip.compress(json.dumps(body).encode()))  # what helm's driver stores
    return {"metadata": {"name": f"sh.helm.release.v1.demo.v{version}", "resourceVersion": "7",
                         "labels": {"owner": "helm", "name": "demo", "version": str(version), "status": status,
                                    **labels}},
            "data": {"release": base64.b64encode(stored).decode()}}  # a Secret's data: base64 once more


def test_a_record_round_trips_as_helm_stores_it():
    record = _secret(2, "deployed")
    body = decode(record, "Secret")
    assert body["info"]["status"] == "deployed"
    assert decode({"data": {"release": encode(body, "Secret")}}, "Secret") == body
    assert decode({"data": {"release": encode(body, "ConfigMap")}}, "ConfigMap") == body


def test_marking_failed_sets_the_label_and_the_json_and_drops_a_copied_ready_label():
    (found,) = revisions([_secret(3, "deployed", **{SEEN_READY: "2"})], "demo", "Secret")
    assert not found.seen_ready  # copied from revision 2 by helm's upgrade: says nothing of revision 3
    patch = failed_patch(found, "det-k8s: upgrade not ready: " + "x" * 1000)
    assert patch["metadata"] == {"labels": {"status": "failed", SEEN_READY: None}, "resourceVersion": "7"}
    info = decode({"data": patch["data"]}, "Secret")["info"]
    assert info["status"] == "failed" and info["description"].startswith("det-k8s: upgrade not ready: x")
    assert len(info["description"]) == 400


def test_rollback_goes_to_the_last_revision_seen_ready_and_status_names_the_command():
    found = revisions([_secret(1, "superseded", **{SEEN_READY: "1"}), _secret(2, "superseded", **{SEEN_READY: "1"}),
                       _secret(3, "failed")], "demo", "Secret")
    assert last_seen_ready(found, 3).revision == 1
    said = state(found, "demo", "det", None, None)
    assert said.line == ("release demo in namespace det is failed at revision 3 in helm's record; no master Deployment; "
                         "to restore service, run: det-k8s rollback demo 1 -n det")
    first = state(revisions([_secret(1, "failed")], "demo", "Secret"), "demo", "det", "m", "Deployment m: 0 of 1")
    assert first.restore == "det-k8s uninstall demo -n det; then install again"
    serving = state(revisions([_secret(1, "deployed")], "demo", "Secret"), "demo", "det", "m", None)
    assert serving.restore is None and serving.line.endswith("the master serves (Deployment m)")
