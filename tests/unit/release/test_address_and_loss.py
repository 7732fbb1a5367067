"""The master's address from its Service; what an uninstall deletes and keeps."""

from __future__ import annotations

from det_k8s.release.address import master_address, node_address
from det_k8s.release.uninstall_effects import summarize
from tests.support.k8s_emulator import node


def service(kind: str, *, ingress=None, node_port=None, port=8080):
    ports = [{"port": port, **({"nodePort": node_port} if node_port else {})}]
    return {"metadata": {"name": "determined-master-service-demo"}, "spec": {"type": kind, "ports": ports},
            "status": {"loadBalancer": {"ingress": ingress or []}}}


def test_load_balancer_ip_or_hostname():
    assert master_address(service("LoadBalancer", ingress=[{"ip": "203.0.113.7"}]), []).url == "http://203.0.113.7:8080"
    named = master_address(service("LoadBalancer", ingress=[{"hostname": "a.elb.example.com"}]), [], tls=True)
    assert named.url == "https://a.elb.example.com:8080"


def test_pending_load_balancer_says_how_to_check():
    address = master_address(service("LoadBalancer"), [], namespace="det")
    assert address.pending and address.url is None
    assert "kubectl get service determined-master-service-demo -n det --watch" in address.note


def test_node_port_prefers_an_external_ip_of_a_ready_node():
    nodes = [node("a", addresses=[{"type": "InternalIP", "address": "10.0.0.2"}]),
             node("b", ready=False, addresses=[{"type": "ExternalIP", "address": "198.51.100.9"}]),
             node("c", addresses=[{"type": "ExternalIP", "address": "198.51.100.3"}])]
    assert node_address(nodes) == "198.51.100.3"
    address = master_address(service("NodePort", node_port=30443, port=8443), nodes, tls=True)
    assert address.url == "https://198.51.100.3:30443" and "Ingress" in address.note
    internal_only = master_address(service("NodePort", node_port=30080), nodes[:1])
    assert internal_only.url == "http://10.0.0.2:30080"


def test_missing_and_cluster_ip_services():
    assert master_address(None, [], release="demo").kind == "missing"
    assert "kubectl port-forward service/determined-master-service-demo 8080:8080" in master_address(
        service("ClusterIP"), []).note


OBJECTS = [{"kind": "Deployment", "metadata": {"name": "determined-master-deployment-demo"}},
           {"kind": "Service", "metadata": {"name": "determined-master-service-demo"}}]
KEPT_PVC = {"metadata": {"name": "determined-db-pvc-demo", "annotations": {"helm.sh/resource-policy": "keep"}}}


def test_bundled_chart_keeps_the_database_volume_and_says_how_to_delete_it():
    s = summarize("demo", "det", OBJECTS, bundled_db=True, pvc=KEPT_PVC, task_pods=2, task_configmaps=2,
                  delete_data=False, keep_pods=False)
    assert not s.permanent_loss and s.pvc_kept
    assert "Deployment determined-master-deployment-demo" in s.deleted
    assert any("2 task pod(s) labelled determined" in line for line in s.deleted)
    assert "kubectl delete pvc determined-db-pvc-demo -n det" in s.kept[0] and "--delete-data" in s.kept[0]


def test_delete_data_is_the_permanent_loss():
    s = summarize("demo", "det", OBJECTS, bundled_db=True, pvc=KEPT_PVC, task_pods=0, task_configmaps=0,
                  delete_data=True, keep_pods=False)
    assert s.permanent_loss and not s.pvc_kept
    assert any("ALL EXPERIMENT RECORDS" in line and "--delete-data" in line for line in s.deleted)


def test_a_chart_without_the_keep_annotation_loses_the_records():
    s = summarize("demo", "det", OBJECTS, bundled_db=True, pvc={"metadata": {"name": "determined-db-pvc-demo"}},
                  task_pods=0, task_configmaps=0, delete_data=False, keep_pods=False)
    assert s.permanent_loss
    assert any("the chart does not keep it" in line for line in s.deleted)


def test_external_database_keeps_the_records_and_keep_pods_keeps_pods():
    s = summarize("demo", "det", OBJECTS, bundled_db=False, pvc=None, task_pods=3, task_configmaps=3,
                  delete_data=False, keep_pods=True)
    assert not s.permanent_loss
    assert any("external database" in line for line in s.kept)
    assert any("3 task pod(s)" in line and "--keep-pods" in line for line in s.kept)


def test_delete_data_names_a_retain_volume_that_keeps_the_records():
    """Issue 38, item 6 (the real PersistentVolume controller: tests/real/test_release_lifecycle.py)."""
    claim = {**KEPT_PVC, "spec": {"volumeName": "db-1"}}
    retain = {"metadata": {"name": "db-1"}, "spec": {"persistentVolumeReclaimPolicy": "Retain"}}
    s = summarize("demo", "det", OBJECTS, bundled_db=True, pvc=claim, task_pods=0, task_configmaps=0,
                  delete_data=True, keep_pods=False, volume=retain)
    assert not s.permanent_loss and "the database volume claim determined-db-pvc-demo (--delete-data)" in s.deleted
    assert s.kept[-1].startswith("the PersistentVolume db-1 (reclaimPolicy Retain) with every experiment record")
    assert "kubectl delete pv db-1" in s.volume_fate
    deleting = {"metadata": {"name": "db-1"}, "spec": {"persistentVolumeReclaimPolicy": "Delete"}}
    s = summarize("demo", "det", OBJECTS, bundled_db=True, pvc=claim, task_pods=0, task_configmaps=0,
                  delete_data=True, keep_pods=False, volume=deleting)
    assert s.permanent_loss and any("PersistentVolume db-1 (reclaimPolicy Delete) is deleted" in ln for ln in s.deleted)
