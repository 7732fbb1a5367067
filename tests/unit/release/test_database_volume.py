"""install/upgrade preflight: the bundled database's volume must be able to bind (issue 24, 2: a PVC that no
StorageClass provisions stays Pending forever, and every later upgrade timed out)."""

from __future__ import annotations

from det_k8s.release.preflight import check_database_volume

DEFAULT = {"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
           "provisioner": "ebs.csi.aws.com"}
MANUAL = {"metadata": {"name": "manual"}, "provisioner": "kubernetes.io/no-provisioner"}


def pv(name, cls, size="30Gi", phase="Available"):
    return {"metadata": {"name": name}, "spec": {"storageClassName": cls, "capacity": {"storage": size}},
            "status": {"phase": phase}}


def lines(values, classes=(), volumes=(), claim=None):
    return [f"{p.path}: {p.message}" for p in check_database_volume(values, classes, volumes, claim)]


def test_no_default_class_and_no_class_named_is_an_error_naming_the_key_and_the_classes():
    (line,) = lines({"db": {"storageSize": "30Gi"}}, [MANUAL])
    assert line.startswith("db.storageClassName: db.storageClassName is unset and the cluster has no default "
                           "StorageClass: the database volume would stay Pending")
    assert check_database_volume({"db": {}}, [MANUAL], [], None)[0].hint.startswith(
        "set db.storageClassName to one of the cluster's classes (manual)")


def test_what_binds_passes():
    assert lines({"db": {"storageSize": "30Gi"}}, [DEFAULT]) == []
    assert lines({"db": {"storageClassName": "standard"}}, [DEFAULT, MANUAL]) == []
    assert lines({"db": {"storageClassName": "manual", "storageSize": "30Gi"}}, [MANUAL], [pv("v", "manual")]) == []
    assert lines({"db": {"storageSize": "10Gi"}}, [], [pv("v", "")]) == []  # a PV without a class, made by hand
    assert lines({"db": {"hostAddress": "pg.example.com"}}, []) == []
    assert lines({"db": {"disablePVC": True}}, []) == []
    assert lines({"db": {}}, [], [], {"status": {"phase": "Bound"}}) == []  # an upgrade: bound already


def test_a_named_class_must_exist_and_a_manual_one_needs_a_volume_large_enough():
    assert lines({"db": {"storageClassName": "fast"}}, [DEFAULT]) == [
        "db.storageClassName: StorageClass fast does not exist: the database volume would stay Pending and the "
        "database never start"]
    (line,) = lines({"db": {"storageClassName": "manual", "storageSize": "30Gi"}}, [MANUAL],
                    [pv("small", "manual", "10Gi"), pv("taken", "manual", phase="Bound")])
    assert "StorageClass manual provisions nothing (kubernetes.io/no-provisioner) and no PersistentVolume of that " \
           "class is Available with 30Gi" in line
