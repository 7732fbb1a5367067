"""Settings against real node sizes: maxSlotsPerPod divides GPU counts, CPU slots fit allocatable."""

from __future__ import annotations

from pathlib import Path

from det_k8s.cluster.model import GPU, Node, Taint
from det_k8s.settings import Document, load_settings
from det_k8s.settings.node_rules import check_nodes, eligible_nodes, task_constraints

ROOT = Path(__file__).resolve().parents[3]


def node(name, gpus=0, cpu="7910m", taints=(), ready=True, cordoned=False, labels=None):
    from det_k8s.quantity import parse_milli

    alloc = {"cpu": parse_milli(cpu), "pods": 110_000}
    if gpus:
        alloc[GPU] = gpus * 1000
    return Node(name, alloc, labels or {}, tuple(taints), ready, cordoned)


def check(text: str, nodes, *sets: str) -> list[str]:
    loaded = load_settings([Document("s.yaml", text)], sets)
    assert not loaded.errors, loaded.errors
    return [p.render() for p in check_nodes(loaded.settings(), nodes, loaded.sources, "nodes.yaml")]


GPU_SETTINGS = "maxSlotsPerPod: 8\ncheckpointStorage: {type: gcs, bucket: b}\n"
CPU_SETTINGS = ("maxSlotsPerPod: 1\nslotType: cpu\nslotResourceRequests:\n  cpu: 8\n"
                "checkpointStorage: {type: gcs, bucket: b}\n")


def test_max_slots_must_divide_every_gpu_node_and_the_gcd_is_suggested():
    (only,) = check(GPU_SETTINGS, [node("a", 4), node("b", 8), node("c", 4)])
    assert only == ("error: maxSlotsPerPod: 8 does not divide the GPUs of 2 node(s): a (4), c (4); set maxSlotsPerPod "
                    "to 4, the greatest common divisor of the node sizes (4, 8) (s.yaml:1)")


def test_a_divisor_passes():
    assert check(GPU_SETTINGS, [node("a", 8), node("b", 16)]) == []


def test_gcd_of_six_and_four_is_two():
    (only,) = check(GPU_SETTINGS, [node("a", 6), node("b", 4)], "maxSlotsPerPod=4")
    assert "set maxSlotsPerPod to 2" in only


def test_no_gpu_nodes_is_a_warning():
    (only,) = check(GPU_SETTINGS, [node("a")])
    assert only.startswith("warning: slotType: no usable node in nodes.yaml offers nvidia.com/gpu")


def test_rocm_slots_are_checked_against_amd_gpus_as_gpu_slots_against_nvidia_ones():
    # slotType rocm (Determined 0.36+) fell into the CPU-slot branch, which has no slot size: nothing was checked.
    rocm = "appVersion: 0.38.1\nslotType: rocm\n" + GPU_SETTINGS
    amd = [Node("a", {"cpu": 64_000, "pods": 110_000, "amd.com/gpu": 4000}, {}, (), True, False),
           Node("b", {"cpu": 64_000, "pods": 110_000, "amd.com/gpu": 8000}, {}, (), True, False)]
    (only,) = check(rocm, amd)
    assert only == ("error: maxSlotsPerPod: 8 does not divide the GPUs of 1 node(s): a (4); set maxSlotsPerPod to 4, "
                    "the greatest common divisor of the node sizes (4, 8) (s.yaml:3)")
    (none,) = check(rocm, [node("c", 8)])  # NVIDIA GPUs are no ROCm slots
    assert none.startswith("warning: slotType: no usable node in nodes.yaml offers amd.com/gpu; GPU tasks will stay "
                           "Pending; install the AMD GPU device plugin")


def test_cpu_slot_must_fit_the_smallest_allocatable_and_a_value_is_suggested():
    (only,) = check(CPU_SETTINGS, [node("big", cpu="15910m"), node("small", cpu="7910m")])
    assert only == ("error: slotResourceRequests.cpu: 8 CPUs per slot do not fit node small, whose allocatable CPU is "
                    "7910m; set slotResourceRequests.cpu to 7.5 or less (s.yaml:4)")


def test_cpu_slot_that_fits_passes():
    assert check(CPU_SETTINGS, [node("a", cpu="7910m")], "slotResourceRequests.cpu=7.5") == []


def test_cpu_pod_larger_than_nodes_warns_with_a_slot_count():
    (only,) = check(CPU_SETTINGS, [node("a", cpu="31910m"), node("b", cpu="15910m")],
                    "slotResourceRequests.cpu=7.5", "maxSlotsPerPod=4")
    assert only.startswith("warning: maxSlotsPerPod: a full pod of 4 slots needs 30 CPUs")
    assert "use maxSlotsPerPod 2" in only


def test_cordoned_not_ready_and_tainted_nodes_do_not_count():
    nodes = [node("a", 4), node("b", 6, cordoned=True), node("c", 6, ready=False),
             node("d", 6, taints=[Taint("dedicated", "infra")])]
    assert check(GPU_SETTINGS, nodes, "maxSlotsPerPod=4") == []


def test_tolerated_taints_count_when_the_pod_spec_tolerates_them():
    text = (ROOT / "examples" / "gpu-cluster.yaml").read_text()
    nodes = [node("a", 4, taints=[Taint("accelerator", "gpu")]), node("b", 6, taints=[Taint("accelerator", "gpu")])]
    (only,) = check(text, nodes)
    assert "b (6)" in only


def test_no_usable_node_at_all_is_an_error_with_reasons():
    (only,) = check(GPU_SETTINGS, [node("a", 4, ready=False), node("b", 4, taints=[Taint("x")])])
    assert only.startswith("error: no node in nodes.yaml can run task pods (1 not ready, 1 taint x:NoSchedule)")


def test_an_empty_node_list_is_an_error():
    assert check(GPU_SETTINGS, [])[0].startswith("error: nodes.yaml lists no nodes, so the node checks cannot run")


def test_task_constraints_come_from_the_slot_types_pod_spec():
    loaded = load_settings([Document("s", (ROOT / "examples" / "cpu-azure.yaml").read_text())])
    constraints = task_constraints(loaded.settings())
    usable, excluded = eligible_nodes([node("a", labels={"node-pool": "cpu"}), node("b")], constraints)
    assert [n.name for n in usable] == ["a"] and excluded == {"node selector": 1}


def _pods_on_the_nodes():
    from det_k8s.cluster.read import pod_from_object

    def pod(name, node_name, cpu, labels=None, owner=None, tolerations=(), selector=None):
        meta = {"name": name, "namespace": "kube-system" if owner else "det", "labels": labels or {}}
        if owner:
            meta["ownerReferences"] = [{"kind": "DaemonSet", "name": owner, "controller": True, "apiVersion": "apps/v1",
                                        "uid": "u"}]
        return pod_from_object({"kind": "Pod", "metadata": meta, "status": {"phase": "Running"},
                                "spec": {"nodeName": node_name, "tolerations": list(tolerations),
                                         "nodeSelector": selector or {}, "containers": [
                                    {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})

    return [pod("determined-master-x", "a", "2", {"determined-system": "master"}),
            pod("determined-db-x", "a", "1500m", {"determined-system": "db"}),
            pod("kube-proxy-1", "b", "100m", owner="kube-proxy"),  # the DaemonSet lands on a and c too
            pod("gpu-plugin-1", "c", "2", owner="nvidia-plugin", tolerations=[{"key": "gpu", "operator": "Exists"}],
                selector={"gpu": "true"})]  # only on nodes labelled gpu=true


def test_cpu_slots_count_as_the_master_counts_them_and_daemonsets_take_every_node():
    text = "maxSlotsPerPod: 1\nslotType: cpu\nslotResourceRequests:\n  cpu: 5\ncheckpointStorage: {type: gcs, bucket: b}\n"
    nodes = [node("a"), node("b"), node("c", labels={"gpu": "true"})]
    loaded = load_settings([Document("s.yaml", text)])
    found = [p.render() for p in check_nodes(loaded.settings(), nodes, loaded.sources, "snap.json", _pods_on_the_nodes())]
    assert found == ["warning: slotResourceRequests.cpu: a slot of 5 CPUs never fits 1 node(s), e.g. a: allocatable "
                     "7910m less 3600m taken by determined-master-x (determined-system), determined-db-x "
                     "(determined-system), kube-proxy (DaemonSet) leaves 4310m; those nodes run no CPU task; lower "
                     "slotResourceRequests.cpu to use them (s.yaml:4)"]
    # without the pods, only allocatable counts
    assert [p.render() for p in check_nodes(loaded.settings(), nodes, loaded.sources, "snap.json")] == []


def test_a_slot_that_fits_no_node_after_what_is_taken_is_an_error():
    text = "maxSlotsPerPod: 1\nslotType: cpu\nslotResourceRequests:\n  cpu: 7.5\ncheckpointStorage: {type: gcs, bucket: b}\n"
    loaded = load_settings([Document("s.yaml", text)])
    (only,) = [p.render() for p in check_nodes(loaded.settings(), [node("a")], loaded.sources, "snap.json",
                                               _pods_on_the_nodes())]
    assert only.startswith("error: slotResourceRequests.cpu: 7.5 CPUs per slot do not fit node a, allocatable 7910m "
                           "less 3600m taken by")
    assert "set slotResourceRequests.cpu to 4 or less" in only


def test_nodes_without_allocatable_are_a_warning():
    from det_k8s.cluster.model import Node

    problems = check(GPU_SETTINGS, [Node("bare", {"pods": 110_000}), *[node(f"g{i}", gpus=8) for i in range(2)]])
    assert any(p.startswith("warning: nodes.yaml: node bare report no allocatable resources") for p in problems)
