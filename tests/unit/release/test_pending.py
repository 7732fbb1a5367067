"""release/pending.py: a release helm left pending-*, read from its records' labels, and the command that recovers it."""

from __future__ import annotations

import datetime

from det_k8s.release.pending import records, stuck


def record(version: int, status: str, release: str = "demo", modified: str = "1795000000") -> dict:
    return {"metadata": {"name": f"sh.helm.release.v1.{release}.v{version}",
                         "labels": {"owner": "helm", "name": release, "version": str(version), "status": status,
                                    "modifiedAt": modified}}}


def test_a_pending_upgrade_is_rolled_back_to_the_last_deployed_revision():
    found = records([record(3, "pending-upgrade"), record(1, "superseded"), record(2, "deployed"),
                     record(9, "deployed", release="other"), {"metadata": {"labels": {"owner": "someone"}}}], "demo")
    assert [(r.revision, r.status) for r in found] == [(1, "superseded"), (2, "deployed"), (3, "pending-upgrade")]
    left = stuck(found, "demo", "ml")
    assert left is not None and (left.revision, left.back_to) == (3, 2)
    assert left.modified == datetime.datetime.fromtimestamp(1795000000, datetime.UTC)
    assert left.recovery == "det-k8s rollback demo 2 -n ml"
    assert left.message.startswith("release demo in namespace ml is pending-upgrade (revision 3 since 2026-")
    assert left.hint == "if no other helm command is working on it, run: det-k8s rollback demo 2 -n ml"


def test_a_pending_install_is_uninstalled_and_a_settled_release_is_not_stuck():
    left = stuck(records([record(1, "pending-install", modified="")], "demo"), "demo", "ml")
    assert left is not None and left.back_to is None and left.modified is None
    assert left.hint == "if no other helm command is working on it, run: det-k8s uninstall demo -n ml; then install again"
    for status in ("deployed", "failed", "superseded"):
        assert stuck(records([record(1, "deployed"), record(2, status)], "demo"), "demo", "ml") is None
    assert stuck([], "demo", "ml") is None
    rolled = stuck(records([record(1, "superseded"), record(2, "failed"), record(3, "pending-rollback")], "demo"),
                   "demo", "ml")
    assert rolled is not None and rolled.back_to == 1  # a failed revision is no place to go back to
